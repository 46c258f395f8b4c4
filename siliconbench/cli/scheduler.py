"""`siliconbench scheduler`: the regression watch's clock (Celery beat) and its one-tick-at-a-time worker."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from siliconbench.contract.errors import UserError

from .common import BROKER_OPTION, FLEET_DATABASE_OPTION, fleet_settings, user_errors


@user_errors
def scheduler(
    broker: str = BROKER_OPTION,
    database: str = FLEET_DATABASE_OPTION,
    tick_s: float = typer.Option(
        None, "--tick-s", help="Seconds between ticks (default: SILICONBENCH_WATCH_TICK_S, 60)"
    ),
    schedule: Path = typer.Option(
        None, "--schedule", help="Celery beat's schedule file (default: one per process under the data dir)"
    ),
) -> None:
    """Check due watches, step campaigns and deliver notifications every --tick-s seconds (Ctrl-C stops).

    Safe to run twice by mistake: a database lock lets one tick run at a time across the fleet."""
    s, broker = fleet_settings(broker, database, wait_for="scheduler")
    tick_s = s.watch_tick_s if tick_s is None else tick_s
    if tick_s <= 0:
        raise UserError("--tick-s", f"{tick_s:g} is not a positive number of seconds.")
    os.environ.update(SILICONBENCH_BROKER_URL=broker, SILICONBENCH_DATABASE_URL=s.database_url)
    from siliconbench.coordinator.celery_app import start  # verb-local: Celery's worker only when it runs

    start(tick_s, schedule)
