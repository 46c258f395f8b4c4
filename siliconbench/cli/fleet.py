"""Fleet verbs: `worker` (join a Mac), `submit`, `status`, `cancel`, `workers`, `reconcile`."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import typer
from rich.table import Table

from siliconbench.errors import UserError
from siliconbench.spec import load_sweep

from .common import console, settings, user_errors


def _fleet_settings(broker: str | None = None, database: str | None = None):
    s = settings(database_url=database)
    broker = broker or s.broker_url
    if not broker:
        raise UserError("SILICONBENCH_BROKER_URL", "the fleet needs a broker: set it or pass --broker redis://HOST:6379/0.")
    if not s.database_url:
        raise UserError("SILICONBENCH_DATABASE_URL", "the fleet needs the shared PostgreSQL: set it or pass "
                        "--database postgresql://USER@HOST/siliconbench.")
    from coordinator.database import require_current

    require_current(s.database_url)
    return s, broker


@user_errors
def worker(
    broker: str = typer.Option(None, "--broker", help="Redis URL (default: SILICONBENCH_BROKER_URL)"),
    database: str = typer.Option(None, "--database", help="PostgreSQL URL (default: SILICONBENCH_DATABASE_URL)"),
    name: str = typer.Option(None, "--name", help="Worker name (default: this machine's short hostname)"),
    models_dir: Path = typer.Option(None, "--models-dir", help="Models folder (default: SILICONBENCH_MODELS_DIR)"),
    engines: str = typer.Option(None, "--engines", help="Offer only these engines, comma-separated (default: all installed)"),
) -> None:
    """Join the fleet: register this machine and run its jobs one at a time (Ctrl-C stops cleanly)."""
    s, broker = _fleet_settings(broker, database)
    name = name or socket.gethostname().split(".")[0]
    mdir = (models_dir or s.resolved_models_dir).expanduser().resolve()
    os.environ.update(SILICONBENCH_BROKER_URL=broker, SILICONBENCH_DATABASE_URL=s.database_url,
                      SILICONBENCH_WORKER_NAME=name, SILICONBENCH_MODELS_DIR=str(mdir))
    if engines:
        bad = [e for e in engines.split(",") if e not in ("llama.cpp", "mlx")]
        if bad:
            raise UserError("--engines", f"unknown engine {bad[0]!r}.", ["llama.cpp", "mlx"])
        os.environ["SILICONBENCH_WORKER_ENGINES"] = engines
    from worker.celery_app import start

    start()


@user_errors
def submit(
    sweep: Path = typer.Argument(..., help="Sweep spec (YAML) with hosts: and placement:"),
    wait: bool = typer.Option(False, "--wait", help="Follow progress (and reconcile) until every job is final"),
    sweep_id: str = typer.Option(None, help="Pin the sweep id"),
) -> None:
    """Expand a sweep, check every job against the live workers, store it and enqueue it."""
    from coordinator.fleet import submit_sweep

    s, broker = _fleet_settings()
    spec = load_sweep(sweep)
    sid, placement = submit_sweep(spec, database_url=s.database_url, broker_url=broker, sweep_id=sweep_id)
    t = Table(title=f"sweep {sid}: {len(placement.jobs)} jobs enqueued", title_justify="left")
    t.add_column("queue")
    t.add_column("jobs", justify="right")
    for q, n in sorted(placement.assignments().items()):
        t.add_row(q, str(n))
    console.print(t)
    if wait:
        _follow(s.database_url, broker, sid)


def _progress_table(database_url: str, sweep_id: str | None) -> tuple[Table, int]:
    from coordinator.database import session_scope
    from coordinator.fleet import progress

    with session_scope(database_url) as ses:
        prog = progress(ses, sweep_id)
    t = Table(title=f"progress of {sweep_id or 'all sweeps'}", title_justify="left")
    statuses = ("queued", "running", "ok", "failed", "cancelled")
    t.add_column("host")
    for st in statuses:
        t.add_column("done" if st == "ok" else st, justify="right")
    pending = 0
    for host, counts in sorted(prog.items()):
        t.add_row(host, *(str(counts.get(st, 0)) for st in statuses))
        pending += counts.get("queued", 0) + counts.get("running", 0)
    return t, pending


def _follow(database_url: str, broker: str, sweep_id: str, every_s: float = 5.0) -> None:
    from coordinator.reconcile import reconcile
    from coordinator.report import print_sweep_table

    while True:
        reconcile(database_url, broker)
        table, pending = _progress_table(database_url, sweep_id)
        if not pending:
            console.print(table)
            break
        time.sleep(every_s)
    print_sweep_table(database_url, sweep_id, console=console)


@user_errors
def status(sweep: str = typer.Argument(None, help="Sweep id (default: all)")) -> None:
    """Progress per host: queued / running / done / failed."""
    s, _ = _fleet_settings()
    console.print(_progress_table(s.database_url, sweep)[0])


@user_errors
def cancel(sweep: str = typer.Argument(..., help="Sweep id")) -> None:
    """Cancel every job of a sweep that has not started; running ones finish and are recorded."""
    from coordinator.database import session_scope
    from coordinator.fleet import cancel as do_cancel

    s, broker = _fleet_settings()
    with session_scope(s.database_url) as ses:
        n = do_cancel(ses, sweep, broker)
    console.print(f"cancelled {n} job(s) of {sweep}")


@user_errors
def workers() -> None:
    """The fleet: online/offline from heartbeats, chip, memory, engines, models, current job, tallies."""
    from coordinator.database import session_scope
    from coordinator.fleet import host_views

    s, _ = _fleet_settings()
    with session_scope(s.database_url) as ses:
        hosts = host_views(ses)
    t = Table(title=f"{len(hosts)} worker(s)", title_justify="left")
    for c in ("name", "state", "chip", "memory", "engines", "models", "current job", "done", "failed", "last heartbeat"):
        t.add_column(c)
    for h in hosts:
        t.add_row(h.name, "[green]online[/]" if h.online else "[red]offline[/]", h.chip or "",
                  f"{(h.memory_bytes or 0) / 2**30:.0f} GiB", ", ".join(f"{e} {v}" for e, v in h.engines.items()),
                  ", ".join(sorted(h.models)), h.current_job_id or "", str(h.jobs_done), str(h.jobs_failed),
                  h.last_heartbeat.strftime("%Y-%m-%d %H:%M:%S") if h.last_heartbeat else "")
    console.print(t)


@user_errors
def reconcile(loop: bool = typer.Option(False, "--loop", help="Keep reconciling every --every seconds"),
              every: float = typer.Option(10.0, "--every")) -> None:
    """Re-enqueue jobs whose worker died or whose message was lost; fail jobs out of attempts."""
    from coordinator.reconcile import reconcile as do_reconcile

    s, broker = _fleet_settings()
    while True:
        counts = do_reconcile(s.database_url, broker)
        if any(counts.values()) or not loop:
            console.print(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in counts.items()))
        if not loop:
            return
        time.sleep(every)
