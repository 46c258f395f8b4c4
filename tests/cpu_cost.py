"""What each test costs the CPU, not the clock: a pytest plugin and its report.

`make test`'s parallel part keeps both cores of this machine busy, so a test's wall time (`--durations`) says more
about what ran beside it than about itself. Its CPU time does not: the user and system seconds of the test's
process and of every child it waited for (engines, workers, servers, builds), from setup to teardown.
A child still running when the test ends (a session's shared server) is counted where it is reaped; daemons the
suite did not start (PostgreSQL, Redis) are not counted at all.

    make test PYTEST_ARGS="-p tests.cpu_cost --cpu-report=/tmp/cpu.jsonl"   # with "=": a separate /tmp/... argument
                                                                         # makes pytest take /tmp for its rootdir
                                                                         # and run without pyproject's settings
    .venv/bin/python -m tests.cpu_cost /tmp/cpu.jsonl          # by file and by test, the most costly first
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table


def pytest_addoption(parser):
    parser.addoption("--cpu-report", metavar="PATH", help="append each test's CPU seconds (JSON lines) to PATH")


def _cpu(t: os.times_result) -> tuple[float, float]:
    """This process's CPU seconds, and those of its children it waited for."""
    return t.user + t.system, t.children_user + t.children_system


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = item.config.getoption("--cpu-report")
    if not path:
        yield
        return
    before = os.times()
    yield
    after = os.times()
    (own, children), (own2, children2) = _cpu(before), _cpu(after)
    line = {
        "test": item.nodeid,
        "own_s": round(own2 - own, 3),
        "children_s": round(children2 - children, 3),
        "wall_s": round(after.elapsed - before.elapsed, 3),
    }
    with open(path, "a") as f:  # one short line a write, appended: the xdist processes never interleave a line
        f.write(json.dumps(line) + "\n")


def report(path: Path, top: int = 15) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        f = by_file[r["test"].split("::")[0]]
        f[0] += r["own_s"] + r["children_s"]
        f[1] += r["wall_s"]
        f[2] += 1
    total = sum(r["own_s"] + r["children_s"] for r in rows)
    console = Console(width=200)  # whole test ids, also into a file
    console.print(f"{len(rows)} tests, {total:,.0f} CPU seconds in all ({total / 60:.1f} CPU minutes)")
    files = Table("file", "tests", "CPU s", "share", "wall s (summed)", title=f"the {top} costliest files")
    for name, (cpu, wall, n) in sorted(by_file.items(), key=lambda kv: -kv[1][0])[:top]:
        files.add_row(name, str(n), f"{cpu:,.0f}", f"{cpu / total:.1%}", f"{wall:,.0f}")
    console.print(files)
    tests = Table("test", "CPU s", "of it children", "wall s", title=f"the {top} costliest tests")
    for r in sorted(rows, key=lambda r: -(r["own_s"] + r["children_s"]))[:top]:
        cpu = r["own_s"] + r["children_s"]
        tests.add_row(r["test"], f"{cpu:,.1f}", f"{r['children_s'] / cpu:.0%}" if cpu else "-", f"{r['wall_s']:,.1f}")
    console.print(tests)


if __name__ == "__main__":
    report(Path(sys.argv[1]))
