"""`siliconbench db ...`: migrations (alembic is the only thing that creates tables)."""

from __future__ import annotations

import typer

from storage.database import current_revision, downgrade as do_downgrade, upgrade as do_upgrade

from .common import console, settings, user_errors

app = typer.Typer(help="Database schema migrations.", no_args_is_help=True)


@app.command()
@user_errors
def upgrade(revision: str = typer.Argument("head")) -> None:
    """Migrate the database (SILICONBENCH_DATABASE_URL, or the embedded SQLite file) up to REVISION."""
    url = settings().resolved_database_url
    do_upgrade(url, revision)
    console.print(f"database at revision {current_revision(url)}")


@app.command()
@user_errors
def downgrade(revision: str = typer.Argument(..., help="Target revision, e.g. base")) -> None:
    """Migrate the database down to REVISION."""
    url = settings().resolved_database_url
    do_downgrade(url, revision)
    console.print(f"database at revision {current_revision(url)}")


@app.command()
@user_errors
def current() -> None:
    """Print the database's current revision."""
    console.print(current_revision(settings().resolved_database_url) or "empty (run `siliconbench db upgrade`)")
