"""What every verb shares: user errors as one paragraph and exit status 2, settings, the console."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from siliconbench.contract.errors import UserError
from siliconbench.contract.settings import Settings, load_settings

from siliconbench.storage.database import ready

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
