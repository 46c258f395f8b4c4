"""`siliconbench worker`: join the fleet from this Mac; `worker install` / `uninstall`: the same as a service of this OS."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import typer
from rich.markup import escape

from siliconbench.contract.errors import UserError
from siliconbench.contract.queues import MAX_JOB_TIMEOUT_S

from siliconbench.worker.service.spec import DEFAULT_STOP_TIMEOUT_S

from .common import (
    BROKER_OPTION,
    EXIT_FAILED_JOBS,
    FLEET_DATABASE_OPTION,
    err_console,
    fleet_settings,
    settings,
    user_errors,
)

# `siliconbench worker` joins the fleet; its `install` / `uninstall` make that a service of this OS.
worker_app = typer.Typer(no_args_is_help=False, pretty_exceptions_show_locals=False)
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
    broker: str = BROKER_OPTION,
    database: str = FLEET_DATABASE_OPTION,
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
    s, broker = fleet_settings(broker, database, wait_for="worker")
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
    broker: str = BROKER_OPTION,
    database: str = FLEET_DATABASE_OPTION,
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
