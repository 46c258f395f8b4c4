"""What starting siliconbench's most frequent processes costs the CPU: a CLI call that opens the database, the
fleet's listing, and a job's fresh child process (a generate job on the llama.cpp binding). A fleet pays the first
two on every command and dashboard action, a worker the third on every job; `make test` pays all three thousands
of times.

    python benchmarks/process_cost.py [--runs 9] [--against REV] [--model tiny-llama-30m] [--models-dir DIR]

Each figure is the user + system CPU seconds of the process and of every child it waited for (os.wait4), the
median over ``--runs`` with a 95 % t-interval. ``--against REV`` measures a git worktree of REV the same way,
interleaved run by run with this checkout (same machine, same moment), and prints it beside.

Needs Redis on 127.0.0.1 (the fleet's listing asks the broker) and the model in the models folder
(`siliconbench models make-tiny`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._interval import interval  # noqa: E402

BROKER = "redis://127.0.0.1:6379/15"
# The job child's cost, read by a parent in the tree under test: the same run_in_child every worker calls.
CHILD = """
import os, sys
from pathlib import Path
from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.spec import SweepSpec
from siliconbench.worker.job.child import run_in_child
models = Path(sys.argv[1])
spec = SweepSpec.model_validate({"name": "cost", "models": [sys.argv[2]], "engines": ["llama.cpp"],
    "quantizations": ["Q8_0"], "repetitions": 1,
    "workloads": [{"kind": "generate", "prompt_tokens": [16], "gen_tokens": [16], "depth": [0]}]})
job = expand(spec, ModelCatalog(models))[0]
before = os.times()
result = run_in_child(job, models)
after = os.times()
assert result.status == "ok", result.error
print(after.children_user + after.children_system - before.children_user - before.children_system)
"""


def _env(tree: Path, db: str, models: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(tree),
        "SILICONBENCH_DATABASE_URL": db,
        "SILICONBENCH_BROKER_URL": BROKER,
        "SILICONBENCH_MODELS_DIR": str(models),
    }


def measure(kind: str, tree: Path, db: str, models: Path, model: str) -> float:
    env = _env(tree, db, models)
    py = sys.executable
    if kind == "CLI: db current":
        return _rusage([py, "-m", "siliconbench.cli.main", "db", "current"], env, tree)
    if kind == "CLI: workers":
        return _rusage([py, "-m", "siliconbench.cli.main", "workers"], env, tree)
    # In the tree: `-c` and `-m` put the working directory first on the path
    out = subprocess.run([py, "-c", CHILD, str(models), model], env=env, capture_output=True, text=True, cwd=tree)
    if out.returncode:
        raise SystemExit(f"the job child failed: {out.stderr[-2000:]}")
    return float(out.stdout.split()[-1])


def _rusage(cmd: list[str], env: dict, tree: Path) -> float:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tree)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(cmd[2:])} failed: {err[-2000:]}")
    return usage.ru_utime + usage.ru_stime


KINDS = ("CLI: db current", "CLI: workers", "job child: generate, binding")


def main(
    runs: int = typer.Option(9, min=1, help="Runs of each kind, interleaved (one gives no interval)"),
    against: str = typer.Option(None, help="A git revision measured beside this checkout"),
    model: str = typer.Option("tiny-llama-30m", help="The model the job child runs (`models make-tiny` makes it)"),
    models_dir: Path = typer.Option(None, help="Models folder (default: SILICONBENCH_MODELS_DIR or the data dir's)"),
) -> None:
    from siliconbench.contract.settings import load_settings

    models = models_dir or load_settings().resolved_models_dir
    console = Console()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this checkout": ROOT}
        if against:
            where = Path(tmp) / "against"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(where), against], check=True
            )
            subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", str(where / "siliconbench")],
                           check=True, stdout=subprocess.DEVNULL)  # fmt: skip
            trees = {against: where, **trees}
        try:
            dbs = {}
            for label, tree in trees.items():  # each tree's own database, migrated first
                dbs[label] = f"sqlite:///{tmp}/{len(dbs)}.sqlite"
                _rusage(
                    [sys.executable, "-m", "siliconbench.cli.main", "db", "upgrade"],
                    _env(tree, dbs[label], models),
                    tree,
                )
            figures: dict[tuple[str, str], list[float]] = {}
            for r in range(runs):
                order = list(trees.items()) if r % 2 == 0 else list(reversed(trees.items()))
                for kind in KINDS:
                    for label, tree in order:
                        figures.setdefault((kind, label), []).append(measure(kind, tree, dbs[label], models, model))
                console.print(f"run {r + 1}/{runs}", style="dim")
        finally:
            if against:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], check=False)
    table = Table(title=f"CPU seconds a process (median, 95% interval; {runs} runs each, interleaved)")
    table.add_column("process")
    for label in trees:
        table.add_column(label, justify="right")
    for kind in KINDS:
        cells = []
        for label in trees:
            med, lo, hi = interval(figures[(kind, label)])
            cells.append(f"{med:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if runs > 1 else " (one run)"))
        table.add_row(kind, *cells)
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
