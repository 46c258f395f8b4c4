"""What every verb shares: user errors as one paragraph and exit status 2, settings, the console."""

from __future__ import annotations

import functools
import sys
from typing import Callable

import typer
from rich.console import Console

from siliconbench.errors import UserError
from siliconbench.settings import Settings, load_settings
from storage.database import ready

# Exit statuses, documented in the README.
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
            err_console.print(f"[bold red]error[/] in [bold]{exc.field}[/]: {exc.message}"
                              + (f" Valid choices: {', '.join(exc.choices)}." if exc.choices else ""),
                              highlight=False, soft_wrap=True)
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


def is_tty() -> bool:
    return sys.stderr.isatty()
