"""`siliconbench db ...`: migrations (alembic is the only thing that creates tables) and least-privilege logins."""

from __future__ import annotations

import os

import typer

from siliconbench.contract.errors import UserError

from siliconbench.storage.database import (
    current_revision,
    downgrade as do_downgrade,
    require_current,
    session_scope,
    upgrade as do_upgrade,
)
from siliconbench.storage.retention import prune_samples
from siliconbench.storage.roles import POOLED_HOST, POOLED_LOGIN, create_login, login_for

from .common import console, settings, user_errors

app = typer.Typer(help="Database schema migrations and least-privilege logins.", no_args_is_help=True)
_ADDRESS = typer.Option(
    None,
    "--address",
    help="The database server's address as that machine reaches it (default: the one in SILICONBENCH_DATABASE_URL)",
)
_PASSWORD_ENV = typer.Option(
    None, "--password-env", help="Take the password from this environment variable (default: a new random one)"
)


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


@app.command()
@user_errors
def prune(
    days: float = typer.Option(
        None, "--days", min=0, help="Keep this many days of raw samples (default: SILICONBENCH_KEEP_SAMPLES_DAYS)"
    ),
) -> None:
    """Delete raw samples older than the retention whose summaries are stored; results and evidence stay."""
    cfg = settings()
    days = cfg.keep_samples_days if days is None else days
    if days is None:
        console.print(
            "nothing pruned: SILICONBENCH_KEEP_SAMPLES_DAYS is unset (keep raw samples forever); set it or pass --days."
        )
        return
    url = cfg.resolved_database_url
    require_current(url)
    with session_scope(url) as session:
        n = prune_samples(session, days)
    console.print(f"deleted {n:,} raw samples of results older than {days:g} days (their summaries stay)")


def _password(var: str | None) -> str | None:
    if var is None:
        return None
    if not os.environ.get(var):
        raise UserError("--password-env", f"the environment variable {var} is not set or empty.")
    return os.environ[var]


def _login(kind: str, login: str, *, password_env: str | None, address: str | None, host: str | None = None):
    """Make the login with the owner's URL (SILICONBENCH_DATABASE_URL), which must be at head."""
    url = settings().resolved_database_url
    require_current(url)
    return create_login(url, kind, login, host=host, password=_password(password_env), address=address)


def _shown(made, password_env: str | None) -> str:
    """The URL to hand over: with a new password in full (printed once, nowhere else to learn it); with one taken
    from the environment, masked (its owner has it, and logs such as a compose one-shot's keep what is printed)."""
    return made.url.render_as_string(hide_password=True) if password_env else made.rendered()


@app.command("worker-role")
@user_errors
def worker_role(
    host: str = typer.Argument(..., help="The worker's name (`siliconbench worker --name`); the login acts only as it"),
    login: str = typer.Option(None, "--login", help="Login name (default: sbw_HOST)"),
    address: str = _ADDRESS,
    password_env: str = _PASSWORD_ENV,
) -> None:
    """Create (or re-key) a worker login for HOST and print the database URL to give that Mac.

    The login can register and heartbeat HOST, claim jobs, and write results of jobs it holds; it cannot
    create, alter, drop or delete anything, nor act as another host (migration 0006)."""
    made = _login("worker", login or login_for(host), host=host, password_env=password_env, address=address)
    console.print(f"worker login [bold]{made.login}[/] may act as host [bold]{host}[/]. On that Mac:", highlight=False)
    print(f"siliconbench worker --name {host} --database '{_shown(made, password_env)}' --broker BROKER_URL")


@app.command("pooled-worker-role")
@user_errors
def pooled_worker_role(
    login: str = typer.Option(POOLED_LOGIN, "--login", help="Login name"),
    address: str = _ADDRESS,
    password_env: str = _PASSWORD_ENV,
) -> None:
    """Create (or re-key) the fleet's pooled worker login, for Macs that connect through PgBouncer (transaction
    pooling; docs/fleet.md, more than ~80 Macs): every Mac may use it, and each acts as the host its worker names.

    It may do what a worker login may (register, heartbeat, claim, write results of jobs it holds) and nothing
    more, but it is not bound to one host (migration 0017): give each Mac its own login where the fleet is small
    enough to connect directly."""
    made = _login("worker", login, host=POOLED_HOST, password_env=password_env, address=address)
    console.print(
        f"pooled worker login [bold]{made.login}[/]: put PgBouncer in front (docs/fleet.md), then on each Mac, "
        "with the URL's host and port those of PgBouncer:",
        highlight=False,
    )
    print(
        f"SILICONBENCH_DATABASE_POOLED=1 siliconbench worker --name NAME --database '{_shown(made, password_env)}' "
        "--broker BROKER_URL"
    )


@app.command("coordinator-role")
@user_errors
def coordinator_role(
    name: str = typer.Argument(..., help="A name for this login's user (the dashboard, the reconciler)"),
    login: str = typer.Option(None, "--login", help="Login name (default: sbc_NAME)"),
    address: str = _ADDRESS,
    password_env: str = _PASSWORD_ENV,
) -> None:
    """Create (or re-key) a coordinator login: reads and writes every table's rows, but no DDL; print its URL."""
    made = _login("coordinator", login or login_for(name, "coordinator"), password_env=password_env, address=address)
    console.print(
        f"coordinator login [bold]{made.login}[/]: SILICONBENCH_DATABASE_URL for the dashboard, "
        "submit and the reconciler:",
        highlight=False,
    )
    print(_shown(made, password_env))
