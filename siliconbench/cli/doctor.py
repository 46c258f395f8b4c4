"""`siliconbench doctor`: what a worker on this machine would see, and what to fix (exit 0 when all is fine)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from .common import settings, user_errors


@user_errors
def doctor(
    broker: str = typer.Option(None, "--broker", help="Redis URL (default: SILICONBENCH_BROKER_URL)"),
    database: str = typer.Option(None, "--database", help="Database URL (default: SILICONBENCH_DATABASE_URL)"),
    models_dir: Path = typer.Option(None, "--models-dir", help="Models folder (default: SILICONBENCH_MODELS_DIR)"),
    timeout: float = typer.Option(3.0, "--timeout", min=0.1, help="Seconds to wait for the broker and the database"),
) -> None:
    """Host facts, engines and their backends, Metal, sleep prevention, thermal state and power, the service, and
    whether the broker and database answer; one line each, with what to fix. Exit 0 when all is fine, 1 otherwise."""
    from siliconbench.worker.runtime.doctor import Status, run_checks  # the worker's view of this machine
    from siliconbench.worker.service import envfile  # verb-local

    envfile.load(os.environ.get(envfile.ENV_FILE_VAR))  # as the installed service sees its settings
    s = settings(database_url=database)
    checks = run_checks(
        broker_url=broker or s.broker_url,
        database_url=s.database_url,
        models_dir=(models_dir or s.resolved_models_dir).expanduser().resolve(),
        timeout_s=timeout,
    )
    width = max(len(c.name) for c in checks)
    typer.echo("siliconbench doctor: what a worker on this machine sees")
    for c in checks:
        typer.echo(f"{c.status.value:<4}  {c.name:<{width}}  {c.detail}")
        if c.fix:
            typer.echo(f"{'':<4}  {'':<{width}}  fix: {c.fix}")
    failed = [c.name for c in checks if c.status is Status.fail]
    if failed:
        typer.echo(f"{len(failed)} problem(s): {', '.join(failed)}")
        raise typer.Exit(1)
    typer.echo("all fine")
