"""What each worker costs one coordinator, from 10 Macs to 1,000: N workers against one real Redis and one real
PostgreSQL, the coordinator's reads and a sweep of no-op jobs with a tenth of the workers killed part-way.

    python benchmarks/fleet_scale.py [--sizes 10,100,300,500,1000] [--real-max 100] [--jobs 10000]
                                     [--pooled-above 80] [--idle-s 20] [--plot docs/evidence/.../fleet-scale.png]

Up to ``--real-max`` workers are real `siliconbench worker` processes (~120 MiB each); above, they are simulated
(benchmarks/_fleet_sim.py: the worker's own registration, heartbeats, claims, leases and result writes, 25 to a
process, with Celery's consumer replaced by a BRPOP of the same queue), and the table says which. Above
``--pooled-above`` workers the workers connect through a private PgBouncer in transaction pooling mode
(harness/pgbouncer.py, the configuration docs/fleet.md shows); the coordinator connects directly.

Per size: time until all are online; memory; PostgreSQL connections per worker idle and busy (TCP connections of
the workers' processes to PostgreSQL or PgBouncer) and the server connections; Redis connections per worker; the
database's row writes/s and Redis commands/s idle and busy; the PostgreSQL backends' CPU; the Fleet page's queries
(the roster: summary by SKU and state and one page) and `siliconbench workers` p95; the scheduler's tick and
reconcile p95; time to store and enqueue the sweep; claim p50/p99 (the worker's own "claimed in" figure); jobs
lost and jobs run twice. Then each figure's growth with N: its log-log slope over the sizes.

Needs PostgreSQL and Redis on 127.0.0.1, and pgbouncer on PATH (or /usr/sbin) for the pooled sizes.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._fleet_scale_round import one_size  # noqa: E402

# (row key, heading, format, the 500-worker target if any: (bound, "<" or "≤"))
FIGURES = [
    ("all_online_s", "all online (s)", "{:.0f}", None),
    ("rss_mib_per_worker", "RSS / worker (MiB)", "{:.0f}", None),
    ("pg_conn_per_worker_idle", "PG conns / worker, idle", "{:.2f}", (1.0, "≤")),
    ("pg_conn_per_worker_busy", "PG conns / worker, busy", "{:.2f}", None),
    ("pg_server_conns_idle", "PG server conns, idle", "{:.0f}", (90, "<")),
    ("pg_server_conns_max", "PG server conns, end", "{:.0f}", (90, "<")),
    ("redis_conn_per_worker_idle", "Redis conns / worker", "{:.2f}", (3.0, "≤")),
    ("pg_writes_per_s_idle", "PG row writes/s, idle", "{:.1f}", None),
    ("broker_cmds_per_s_idle", "Redis cmds/s, idle", "{:.0f}", None),
    ("pg_cpu_ms_per_s_idle", "PG CPU ms/s, idle", "{:.0f}", None),
    ("fleet_page_p95_ms", "Fleet page p95 (ms)", "{:.0f}", (1000, "<")),
    ("workers_cli_p95_ms", "`workers` p95 (ms)", "{:.0f}", None),
    ("tick_p95_ms", "scheduler tick p95 (ms)", "{:.0f}", (1000, "<")),
    ("reconcile_idle_p95_ms", "reconcile p95, idle (ms)", "{:.0f}", (1000, "<")),
    ("claims_steady", "claims, steady load", "{:.0f}", None),
    ("claim_p50_ms", "claim p50, steady: probe (ms)", "{:.1f}", None),
    ("claim_p99_ms", "claim p99, steady: probe (ms)", "{:.1f}", (50, "<")),
    ("claim_workers_p50_ms", "claim p50, steady: workers (ms)", "{:.1f}", None),
    ("claim_workers_p99_ms", "claim p99, steady: workers (ms)", "{:.1f}", None),
    ("store_and_enqueue_s", "store + enqueue sweep (s)", "{:.1f}", None),
    ("jobs_per_s", "no-op storm: jobs/s", "{:.0f}", None),
    ("pg_writes_per_s_busy", "PG row writes/s, storm", "{:.0f}", None),
    ("broker_cmds_per_s_busy", "Redis cmds/s, storm", "{:.0f}", None),
    ("pg_cpu_ms_per_job", "PG CPU ms / job", "{:.2f}", None),
    ("claim_storm_p50_ms", "claim p50, storm (ms)", "{:.1f}", None),
    ("claim_storm_p99_ms", "claim p99, storm (ms)", "{:.1f}", None),
    ("reconcile_storm_p95_ms", "reconcile p95, storm (ms)", "{:.0f}", None),
    ("killed_workers", "workers killed -9", "{:.0f}", None),
    ("rerun_after_kill", "jobs re-run after the kill", "{:.0f}", None),
    ("lost", "jobs lost", "{:.0f}", (0, "≤")),
    ("run_twice", "jobs run twice (worker alive)", "{:.0f}", (0, "≤")),
]
SLOPES = ["pg_writes_per_s_idle", "broker_cmds_per_s_idle", "pg_cpu_ms_per_s_idle", "fleet_page_p95_ms",
          "workers_cli_p95_ms", "reconcile_idle_p95_ms", "claim_p99_ms"]  # fmt: skip


def slope(rows: list[dict], key: str) -> float | None:
    """Least-squares slope of log(figure) on log(N): 1 is linear growth, 2 quadratic."""
    pts = [(math.log(r["workers"]), math.log(r[key])) for r in rows if r.get(key) and r[key] > 0]
    if len(pts) < 2:
        return None
    mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def meets(value: float, target: tuple[float, str]) -> bool:
    bound, op = target
    return value < bound if op == "<" else value <= bound


def table(rows: list[dict]) -> Table:
    t = Table(title="fleet scale: one coordinator, one Redis, one PostgreSQL (max_connections 100), 2 cores")
    t.add_column("figure")
    for r in rows:
        t.add_column(f"N={r['workers']}\n{r['kind']}{', PgBouncer' if r['pgbouncer'] else ''}", justify="right")
    t.add_column("target at 500", justify="right")
    for key, heading, fmt, target in FIGURES:
        cells = []
        for r in rows:
            v = r.get(key)
            cell = "—" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)
            if target and r["workers"] == 500 and cell != "—":
                cell += " ✓" if meets(v, target) else " ✗"
            cells.append(cell)
        t.add_row(heading, *cells, f"{target[1]} {target[0]:g}" if target else "")
    return t


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    n = [r["workers"] for r in rows]
    for key, label in (("pg_writes_per_s_idle", "PG row writes/s, idle"), ("broker_cmds_per_s_idle", "Redis cmds/s, idle"),
                       ("pg_cpu_ms_per_s_idle", "PG CPU ms/s, idle")):  # fmt: skip
        axes[0].loglog(n, [r[key] for r in rows], "o-", label=label)
    axes[0].loglog(n, [n_ / n[0] * rows[0]["pg_writes_per_s_idle"] for n_ in n], ":", color="grey", label="linear")
    axes[0].set(xlabel="workers", title="load on the coordinator's services, idle fleet")
    for key, label in (("fleet_page_p95_ms", "Fleet page p95"), ("reconcile_idle_p95_ms", "reconcile p95, idle"),
                       ("tick_p95_ms", "scheduler tick p95"), ("claim_p99_ms", "claim p99, steady load")):  # fmt: skip
        axes[1].loglog(n, [max(r[key], 0.1) for r in rows], "o-", label=label)
    axes[1].set(xlabel="workers", ylabel="ms", title="latencies")
    for ax in axes:
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(
    sizes: str = typer.Option("10,100,300,500,1000", help="fleet sizes, comma-separated"),
    real_max: int = typer.Option(100, help="at most this many real worker processes; above, simulated"),
    pooled_above: int = typer.Option(80, help="above this many workers, through PgBouncer"),
    jobs: int = typer.Option(10_000, help="no-op jobs in the sweep"),
    idle_s: float = typer.Option(20.0, help="the idle window's length"),
    steady_s: float = typer.Option(30.0, help="the steady phase's length (a claim per worker every 10 s)"),
    kill_share: float = typer.Option(0.1, help="share of workers killed -9 once 30% of the sweep is done"),
    plot_to: Path = typer.Option(None, "--plot", help="write the growth plot (PNG) here"),
) -> None:
    console = Console()
    rows = []
    for n in (int(s) for s in sizes.split(",")):
        kind = "simulated" if n > real_max else "real"
        console.print(f"[bold]N={n}[/] ({kind}{', through PgBouncer' if n > pooled_above else ''}) …")
        rows.append(
            one_size(
                n,
                simulated=n > real_max,
                jobs=jobs,
                idle_s=idle_s,
                steady_s=steady_s,
                pooled=n > pooled_above,
                kill_share=kill_share,
            )
        )
        console.print(table(rows))
    growth = Table(title="growth with N: log-log slope (1 = linear, 2 = quadratic; target ≤ 1.1)")
    growth.add_column("figure")
    growth.add_column("slope", justify="right")
    for key in SLOPES:
        s = slope(rows, key)
        growth.add_row(next(h for k, h, *_ in FIGURES if k == key), "—" if s is None else f"{s:.2f}")
    console.print(growth)
    if plot_to is not None:
        plot(rows, plot_to)
        console.print(f"plot: {plot_to}")


if __name__ == "__main__":
    typer.run(main)
