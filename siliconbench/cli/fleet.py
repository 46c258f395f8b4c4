"""Fleet verbs: `worker` (join a Mac; `worker install` / `uninstall`: as a service), `submit`, `status`, `cancel`,
`workers`, `reconcile`."""

from __future__ import annotations

import logging
import os
import socket
import time
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from siliconbench.contract.errors import UserError
from siliconbench.contract.queues import MAX_JOB_TIMEOUT_S
from siliconbench.contract.spec import load_sweep
from siliconbench.contract.workloads import notices

from siliconbench.storage.database import require_current, session_scope, wait_until_current
from siliconbench.storage.outages import run_forever
from siliconbench.worker.service.spec import DEFAULT_STOP_TIMEOUT_S

from .common import EXIT_FAILED_JOBS, console, err_console, settings, user_errors


def _fleet_settings(broker: str | None = None, database: str | None = None, wait_for: str | None = None):
    """The fleet's settings, the database checked; ``wait_for`` (a long-running verb's name) waits out a database
    that cannot be reached yet instead of failing at once."""
    s = settings(database_url=database)
    broker = broker or s.broker_url
    if not broker:
        raise UserError(
            "SILICONBENCH_BROKER_URL", "the fleet needs a broker: set it or pass --broker redis://HOST:6379/0."
        )
    if not s.database_url:
        raise UserError(
            "SILICONBENCH_DATABASE_URL",
            "the fleet needs the shared PostgreSQL: set it or pass --database postgresql://USER@HOST/siliconbench.",
        )

    if wait_for:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
        wait_until_current(s.database_url, wait_for, logging.getLogger(f"siliconbench.{wait_for}"))
    else:
        require_current(s.database_url)
    return s, broker


# `siliconbench worker` joins the fleet; its `install` / `uninstall` make that a service of this OS.
worker_app = typer.Typer(no_args_is_help=False, pretty_exceptions_show_locals=False)
_BROKER = typer.Option(None, "--broker", help="Redis URL (default: SILICONBENCH_BROKER_URL)")
_DATABASE = typer.Option(None, "--database", help="PostgreSQL URL (default: SILICONBENCH_DATABASE_URL)")
_NAME = typer.Option(None, "--name", help="Worker name (default: this machine's short hostname)")
_MODELS_DIR = typer.Option(None, "--models-dir", help="Models folder (default: SILICONBENCH_MODELS_DIR)")
_ENGINES = typer.Option(None, "--engines", help="Offer only these engines, comma-separated (default: all installed)")


def _check_engines(engines: str | None) -> None:
    bad = [e for e in (engines or "").split(",") if engines and e not in ("llama.cpp", "mlx")]
    if bad:
        raise UserError("--engines", f"unknown engine {bad[0]!r}.", ["llama.cpp", "mlx"])


@worker_app.callback(invoke_without_command=True)
@user_errors
def worker(
    ctx: typer.Context,
    broker: str = _BROKER,
    database: str = _DATABASE,
    name: str = _NAME,
    models_dir: Path = _MODELS_DIR,
    engines: str = _ENGINES,
) -> None:
    """Join the fleet: register this machine and run its jobs one at a time (Ctrl-C stops cleanly).

    `siliconbench worker install [OPTIONS]` runs it as a service instead (LaunchAgent / systemd user unit)."""
    if ctx.invoked_subcommand is not None:
        if any(v is not None for v in (broker, database, name, models_dir, engines)):
            raise UserError(
                ctx.invoked_subcommand,
                f"options go after the verb: `siliconbench worker "
                f"{ctx.invoked_subcommand} --broker ... --database ...`.",
            )
        return
    from siliconbench.worker.service import envfile  # an installed LaunchAgent's passwords (SILICONBENCH_ENV_FILE)

    envfile.load(os.environ.get(envfile.ENV_FILE_VAR))
    s, broker = _fleet_settings(broker, database, wait_for="worker")
    name = name or socket.gethostname().split(".")[0]
    mdir = (models_dir or s.resolved_models_dir).expanduser().resolve()
    os.environ.update(
        SILICONBENCH_BROKER_URL=broker,
        SILICONBENCH_DATABASE_URL=s.database_url,
        SILICONBENCH_WORKER_NAME=name,
        SILICONBENCH_MODELS_DIR=str(mdir),
    )
    if engines:
        _check_engines(engines)
        os.environ["SILICONBENCH_WORKER_ENGINES"] = engines
    from siliconbench.worker.runtime.celery_app import start  # verb-local

    start()


def _print_service(fn, **kwargs) -> None:
    from siliconbench.worker.service import ServiceError  # verb-local

    try:
        lines = fn(**kwargs)
    except ServiceError as exc:
        err_console.print(f"[bold red]error[/]: {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_FAILED_JOBS) from None
    for line in lines:
        typer.echo(line)


@worker_app.command("install")
@user_errors
def worker_install(
    broker: str = _BROKER,
    database: str = _DATABASE,
    name: str = _NAME,
    models_dir: Path = _MODELS_DIR,
    engines: str = _ENGINES,
    no_start: bool = typer.Option(
        False, "--no-start", help="Write the service file only; print the command that loads it"
    ),
    stop_timeout: int = typer.Option(
        DEFAULT_STOP_TIMEOUT_S,
        "--stop-timeout",
        min=1,
        max=MAX_JOB_TIMEOUT_S + 600,
        help="Seconds a stopping worker gets to finish its running job, then is killed",
    ),
) -> None:
    """Run `siliconbench worker` with these options as a service that starts at login and restarts on a crash.

    macOS: a LaunchAgent (ProcessType Interactive: no background throttling), loaded with launchctl bootstrap.

    Linux: a systemd user unit, enabled with systemctl --user where a user manager runs.

    Settings that carry a password go to a file only you can read (mode 0600), not into the service file."""
    from siliconbench.worker.service import install  # verb-local

    _check_engines(engines)
    s = settings(database_url=database)  # validates the SILICONBENCH_* settings the service will get
    if not (broker or s.broker_url):
        raise UserError(
            "SILICONBENCH_BROKER_URL", "the worker service needs a broker: pass --broker redis://HOST:6379/0."
        )
    if not s.database_url:
        raise UserError(
            "SILICONBENCH_DATABASE_URL",
            "the worker service needs the shared PostgreSQL: pass --database postgresql://USER@HOST/siliconbench.",
        )
    given = [
        ("--broker", broker),
        ("--database", database),
        ("--name", name),
        ("--models-dir", str(models_dir.expanduser().resolve()) if models_dir else None),
        ("--engines", engines),
    ]
    _print_service(
        install, options=[(k, v) for k, v in given if v is not None], start=not no_start, stop_timeout_s=stop_timeout
    )


@worker_app.command("uninstall")
@user_errors
def worker_uninstall() -> None:
    """Stop the worker service (after its running job) and remove its files."""
    from siliconbench.worker.service import uninstall  # verb-local

    _print_service(uninstall)


@user_errors
def submit(
    sweep: Path = typer.Argument(..., help="Sweep spec (YAML) with hosts: and placement:"),
    wait: bool = typer.Option(False, "--wait", help="Follow progress (and reconcile) until every job is final"),
    sweep_id: str = typer.Option(None, help="Pin the sweep id"),
) -> None:
    """Expand a sweep, check every job against the live workers, store it and enqueue it."""
    from siliconbench.coordinator.fleet.sweeps import submit_sweep  # verb-local

    s, broker = _fleet_settings()
    spec = load_sweep(sweep)
    sid, placement = submit_sweep(spec, database_url=s.database_url, broker_url=broker, sweep_id=sweep_id)
    for text in notices(placement.jobs):
        console.print(f"[yellow]note:[/] {text}")
    t = Table(title=f"sweep {sid}: {len(placement.jobs)} jobs enqueued", title_justify="left")
    t.add_column("queue")
    t.add_column("jobs", justify="right")
    for q, n in sorted(placement.assignments().items()):
        t.add_row(q, str(n))
    console.print(t)
    if wait:
        _follow(s.database_url, broker, sid)


def _progress_table(database_url: str, sweep_id: str | None) -> tuple[Table, int]:
    from siliconbench.coordinator.fleet.sweeps import progress  # verb-local

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
    from siliconbench.coordinator.fleet.reconcile import reconcile  # verb-local
    from siliconbench.coordinator.reports.tables import print_sweep_table  # verb-local

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
    from siliconbench.coordinator.fleet.sweeps import cancel as do_cancel  # verb-local

    s, broker = _fleet_settings()
    with session_scope(s.database_url) as ses:
        n = do_cancel(ses, sweep, broker)
    console.print(f"cancelled {n} job(s) of {sweep}")


@user_errors
def workers() -> None:
    """The fleet: online/offline from heartbeats, SKU (what `confirm --sku` takes), engines, the models each holds
    with their forms, current job (or the model it is fetching), tallies."""
    from siliconbench.coordinator.fleet.peers import sku_of  # verb-local
    from siliconbench.coordinator.fleet.sweeps import host_views  # verb-local

    s, _ = _fleet_settings()
    with session_scope(s.database_url) as ses:
        hosts = host_views(ses)
    t = Table(title=f"{len(hosts)} worker(s)", title_justify="left")
    for c in ("name", "state", "sku", "engines", "models", "current job", "done", "failed", "last heartbeat"):
        t.add_column(c)
    for h in hosts:
        t.add_row(
            h.name,
            "[green]online[/]" if h.online else "[red]offline[/]",
            sku_of(h),
            ", ".join(f"{e} {v}" for e, v in h.engines.items()),
            h.models_text(),
            " ".join(filter(None, [h.current_job_id, h.activity_text()])),
            str(h.jobs_done),
            str(h.jobs_failed),
            h.last_heartbeat.strftime("%Y-%m-%d %H:%M:%S") if h.last_heartbeat else "",
        )
    console.print(t)


@user_errors
def reconcile(
    loop: bool = typer.Option(False, "--loop", help="Keep reconciling every --every seconds"),
    every: float = typer.Option(10.0, "--every"),
) -> None:
    """Re-enqueue jobs whose worker died or whose message was lost; fail jobs out of attempts."""
    from siliconbench.coordinator.fleet.reconcile import reconcile as do_reconcile  # verb-local

    s, broker = _fleet_settings(wait_for="reconcile" if loop else None)

    def once() -> None:
        counts = do_reconcile(s.database_url, broker)
        if any(counts.values()) or not loop:
            console.print(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in counts.items()))

    if not loop:
        return once()
    # A broker restart or a database cut is waited out (one line when it starts, one when it ends), never fatal.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    run_forever(once, every, name="reconcile", log=logging.getLogger("siliconbench.reconcile"))
