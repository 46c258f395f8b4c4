"""What the service's own bookkeeping costs: 10,000 no-engine jobs through the real stack, side by
side with a raw Celery no-op task on the same Redis.

    python benchmarks/plumbing.py [--jobs 10000] [--workers 2] [--login worker|owner] [--rounds 1]

Workers run on their own least-privilege logins (`--login worker`, as a fleet should: row-level security on
every claim and result write), or on the database owner's (`--login owner`, the cost without it).

Needs PostgreSQL and Redis on 127.0.0.1 (a fresh database and Redis db 7 are used and removed).
Prints: time to expand + store + enqueue, end-to-end jobs/s, dispatch latency p50/p99 (enqueue to
claim, from the jobs table), and the raw Celery figures, measured before and after the siliconbench
phase on the same worker processes (the ratio is to their mean: the load of a shared machine drifts). Targets: enqueue < 2 s; >= 0.5x raw throughput.
With ``--rounds N`` it runs N such rounds (each raw / siliconbench / raw, fresh database and workers) and
prints each round's ratio and their median and where the earlier runs are (docs/evidence).

``--profile DIR`` samples each siliconbench worker with py-spy (``PY_SPY``, default ``py-spy`` on PATH)
during the siliconbench phase of the first round and writes each worker's collapsed stacks there (``--format raw``:
one line per stack and its sample count, what flame graph tools read).
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._plumbing_round import one_round  # noqa: E402

# Earlier runs of this benchmark, beside which a new one is read: docs/evidence/house-2026-12-04/plumbing-ab.txt.
EARLIER = "docs/evidence/house-2026-12-04/plumbing-ab.txt and docs/evidence/house-fifth-floor-2026-12-06/figures-moved-from-code.md"


def main(
    jobs: int = 10_000,
    workers: int = 2,
    timeout_s: float = 900,
    login: str = typer.Option("worker", help="worker: each worker on its own worker login; owner: the owner's"),
    rounds: int = typer.Option(1, help="rounds, each raw / siliconbench / raw; their median is printed"),
    profile: Path = typer.Option(None, help="py-spy samples of the workers (first round) into this folder"),
) -> None:
    console = Console()
    figures = []
    for n in range(rounds):
        figures.append(one_round(console, jobs, workers, timeout_s, login, profile if n == 0 else None))
        if rounds > 1:
            f = figures[-1]
            console.print(
                f"round {n + 1}/{rounds}: siliconbench {f[0]:,.0f} jobs/s, raw Celery {f[1]:,.0f} jobs/s, "
                f"{f[0] / f[1]:.2f}×"
            )
    t = Table(
        title=f"end-to-end jobs/s, ours vs raw Celery no-ops on the same workers ({os.cpu_count()} cores, "
        f"a shared machine: single rounds vary ±10-20%)"
    )
    for col in ("", "siliconbench", "raw Celery", "ratio"):
        t.add_column(col, justify="right")
    for n, (ours, raw) in enumerate(figures):
        t.add_row(f"this run, round {n + 1}", f"{ours:,.0f}", f"{raw:,.0f}", f"{ours / raw:.2f}×")
    ratios = [ours / raw for ours, raw in figures]
    t.add_row(
        f"this run, median of {len(figures)}",
        f"{statistics.median(o for o, _ in figures):,.0f}",
        f"{statistics.median(r for _, r in figures):,.0f}",
        f"{statistics.median(ratios):.2f}× (target ≥ 0.5×)",
    )
    console.print(t)
    console.print(f"earlier runs on this machine: {EARLIER}")


if __name__ == "__main__":
    typer.run(main)
