"""What every verb shares: user errors as one paragraph and exit status 2, settings, the console."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from siliconbench.contract.errors import UserError
from siliconbench.contract.settings import Settings, load_settings

from siliconbench.storage.database import ready, require_current, wait_until_current

# Exit statuses, documented in docs/cli.md.
EXIT_OK, EXIT_FAILED_JOBS, EXIT_USER_ERROR = 0, 1, 2

# Piped output (CI logs, `| tee`) would otherwise wrap tables at 80 columns.
console = Console(width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 200)


def user_errors(fn: Callable) -> Callable:
    """Turn a UserError into one clear paragraph on stderr and exit status 2 (nothing was written)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            err_console.print(
                f"[bold red]error[/] in [bold]{exc.field}[/]: {exc.message}"
                + (f" Valid choices: {', '.join(exc.choices)}." if exc.choices else ""),
                highlight=False,
                soft_wrap=True,
            )
            err_console.print("Nothing was run, enqueued or written.", style="dim")
            raise typer.Exit(EXIT_USER_ERROR) from None

    return wrapper


def settings(models_dir=None, database_url=None) -> Settings:
    return load_settings(models_dir=models_dir, database_url=database_url)


def database(s: Settings) -> str:
    """The database URL, ready: SQLite (the embedded database) migrates itself, PostgreSQL must be current."""
    url = s.resolved_database_url
    ready(url)
    return url


@contextlib.contextmanager
def byte_progress() -> Iterator[Callable[[str, int, int], None]]:
    """A progress bar per task (hashing, downloading) fed by (description, bytes done, bytes in all)."""
    bars = Progress(
        TextColumn("  {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    tasks: dict[str, int] = {}

    def update(desc: str, done: int, total: int) -> None:
        if desc not in tasks:
            tasks[desc] = bars.add_task(desc, total=total or None)
        bars.update(tasks[desc], completed=done, total=total or None)

    with bars:
        yield update


def emit(text: str, out: Path | None) -> None:
    """A verb's output to the file asked for (saying so), else to stdout as is."""
    if out:
        out.write_text(text)
        console.print(f"wrote {out}", highlight=False)
    else:
        sys.stdout.write(text)


def check_format(fmt: str, choices: tuple[str, ...] = ("table", "json")) -> None:
    """A verb's --format, refused by name (exit 2) before anything is read."""
    if fmt not in choices:
        raise UserError("--format", f"unknown format {fmt!r}.", list(choices))


def print_json(data) -> None:
    """A verb's JSON output: indented, anything else (dates) as its string, one newline after."""
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


# The fleet verbs' connection options (`worker`, `scheduler`): the same flags, defaults and help everywhere.
BROKER_OPTION = typer.Option(None, "--broker", help="Redis URL (default: SILICONBENCH_BROKER_URL)")
FLEET_DATABASE_OPTION = typer.Option(None, "--database", help="PostgreSQL URL (default: SILICONBENCH_DATABASE_URL)")


def fleet_settings(broker: str | None = None, database: str | None = None, wait_for: str | None = None):
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
