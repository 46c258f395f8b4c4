"""tests/process_census.py reads dump-acct's lines and names each Python process's kind by its command line."""

from __future__ import annotations

from tests.process_census import kind_of, tally

# dump-acct's columns: comm|version|utime|stime|etime|uid|gid|mem|io|pid|ppid|flags|exitcode|tty|btime (ticks of 1/100 s)
DUMPED = """\
python          |v3|   120.00|    30.00|   300.00|     0|     0| 53944.00|     0.00|   101|   100|     |       0|__      |Mon Dec  7 19:31:20 2026
python          |v3|    50.00|    10.00|   100.00|     0|     0| 53944.00|     0.00|   102|   100|     |       0|__      |Mon Dec  7 19:31:21 2026
llama-bench     |v3|     9.00|     1.00|    20.00|     0|     0|  7967.00|     0.00|   103|   102|     |       0|__      |Mon Dec  7 19:31:21 2026
python3         |v3|     7.00|     3.00|    21.00|     0|     0| 15320.00|     0.00|   104|     1|     |       0|__      |Mon Dec  7 19:31:22 2026
"""


def test_each_process_is_counted_under_its_kind():
    commands = {
        101: "/w/.venv/bin/python -m siliconbench.cli.main regressions bisect sweep.yaml --good b1 --bad b4",
        102: "/w/.venv/bin/python -m siliconbench.worker.job.child_main 5",
    }
    kinds = tally(DUMPED, commands)
    assert kinds["CLI: regressions"] == [1, 1.5]
    assert kinds["job child"] == [1, 0.6]
    assert kinds["llama-bench"] == [1, 0.1]
    assert kinds["python, not this venv's"] == [1, 0.1]  # no census line: another interpreter


def test_kinds_by_command_line():
    assert kind_of("/w/.venv/bin/siliconbench worker --name a --broker redis://127.0.0.1:6379/3") == "fleet worker"
    assert kind_of("/w/.venv/bin/python -m siliconbench.cli.main scheduler --tick-s 2") == "scheduler"
    assert kind_of("/w/.venv/bin/python -m mlx_lm server --model m --port 1") == "mlx_lm server"
    assert kind_of("/w/.venv/bin/python -c import sys;exec(eval(sys.stdin.readline()))") == "pytest"
    assert kind_of("/w/.venv/bin/siliconbench workers --format json") == "CLI: workers"
    assert kind_of("/w/.venv/bin/python /w/benchmarks/process_cost.py --runs 1") == "benchmark script"
    assert kind_of("/w/.venv/bin/python -c print(1)") == "python: other"
