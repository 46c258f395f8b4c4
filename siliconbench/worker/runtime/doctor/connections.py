"""The checks of what a worker connects to: the broker and the database reachable within a few seconds, the
database's schema at this siliconbench's revision, whether its URL is a worker login bound to a host, and whether one
more Mac fits in PostgreSQL's connections."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import redis
from sqlalchemy import create_engine
from sqlalchemy.exc import DBAPIError, NoSuchModuleError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from siliconbench.contract.errors import UserError
from siliconbench.contract.settings import env_setting

from siliconbench.storage.database import head_revision, normalize_url, revision_of, shown
from siliconbench.storage.roles import POOLED_HOST, identity
from siliconbench.worker.runtime.doctor.check import Check, Status

# The connections the coordinator's own services hold (reconciler, scheduler, dashboard, a submit or two) and
# PostgreSQL's superuser reserve: what a fleet connecting directly cannot use.
COORDINATOR_CONNECTIONS = 20


def hide_password(url: str) -> str:
    """A URL for output: the password replaced by ***."""
    try:
        parts = urlsplit(url)
        if parts.password:
            user = parts.username or ""
            host = parts.hostname or ""
            port = f":{parts.port}" if parts.port else ""
            return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))
    except ValueError:
        pass
    return url


# ------------------------------------------------------------------------------------ broker, database


def check_broker(url: str | None, timeout_s: float) -> list[Check]:
    if not url:
        return [
            Check(
                "broker",
                Status.info,
                "not configured (embedded runs need none); a worker needs "
                "--broker redis://HOST:6379/0 or SILICONBENCH_BROKER_URL",
            )
        ]
    shown = hide_password(url)
    if urlsplit(url).scheme not in ("redis", "rediss"):
        return [
            Check(
                "broker", Status.fail, f"{shown} is not a Redis URL", "set SILICONBENCH_BROKER_URL=redis://HOST:6379/0"
            )
        ]
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
        try:
            client.ping()
        finally:
            client.close()
    except redis.exceptions.AuthenticationError as exc:
        return [
            Check(
                "broker",
                Status.fail,
                f"{shown} refused the password: {exc}",
                "use the password the coordinator's Redis requires (its .env) in the broker URL",
            )
        ]
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
        return [
            Check(
                "broker",
                Status.fail,
                f"{shown} unreachable within {timeout_s:g} s: {exc}",
                "start Redis on the coordinator (`docker compose up -d`) and make sure this machine reaches "
                "that host and port (the compose ports bind 127.0.0.1 unless SILICONBENCH_BIND says otherwise)",
            )
        ]
    except redis.exceptions.RedisError as exc:
        return [Check("broker", Status.fail, f"{shown}: {exc}", "check the broker URL")]
    return [Check("broker", Status.ok, f"{shown} answers")]


def check_database(url: str | None, timeout_s: float) -> list[Check]:
    if not url:
        return [
            Check(
                "database",
                Status.info,
                "not configured (embedded runs use the SQLite file); a worker needs "
                "--database postgresql://USER@HOST/siliconbench or SILICONBENCH_DATABASE_URL",
            )
        ]
    try:
        u = normalize_url(url)
    except UserError as exc:
        return [
            Check(
                "database",
                Status.fail,
                exc.message,
                "set SILICONBENCH_DATABASE_URL=postgresql://USER@HOST/siliconbench",
            )
        ]
    where = shown(u)
    args = {"connect_timeout": max(1, int(round(timeout_s)))} if u.get_backend_name() == "postgresql" else {}
    try:
        engine = create_engine(u, poolclass=NullPool, connect_args=args)
    except (ImportError, NoSuchModuleError) as exc:
        return [Check("database", Status.fail, f"no driver for {where}: {exc}", "pip install 'siliconbench[postgres]'")]
    try:
        with engine.connect() as conn:
            current = revision_of(conn)
            login = _login_check(conn) + _capacity_check(conn) if current == head_revision() else []
    except DBAPIError as exc:
        said = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        return [
            Check(
                "database",
                Status.fail,
                f"{where} unreachable within {timeout_s:g} s: {said}",
                "check host, port, user and password in the URL; PostgreSQL must accept connections from this "
                "machine (the compose ports bind 127.0.0.1 unless SILICONBENCH_BIND says otherwise)",
            )
        ]
    finally:
        engine.dispose()
    head = head_revision()
    if current is None:
        return [
            Check(
                "database",
                Status.fail,
                f"{where} answers but has no siliconbench tables",
                "run `siliconbench db upgrade` against it (the compose stack's one-shot migration does)",
            )
        ]
    if current != head:
        return [
            Check(
                "database",
                Status.fail,
                f"{where} is at schema revision {current}, this siliconbench needs {head}",
                "upgrade siliconbench here, or run `siliconbench db upgrade` there: both at one revision",
            )
        ]
    return [Check("database", Status.ok, f"{where} answers, schema at {head}"), *login]


def _capacity_check(conn) -> list[Check]:
    """Whether one more Mac fits: each worker connecting directly holds one PostgreSQL connection (benchmarks/
    fleet_scale.py), and the coordinator's services need theirs (COORDINATOR_CONNECTIONS)."""
    if conn.dialect.name != "postgresql":
        return []
    limit = int(conn.exec_driver_sql("SHOW max_connections").scalar())
    hosts = conn.exec_driver_sql("SELECT count(*) FROM hosts").scalar()
    if env_setting("database_pooled"):
        return [Check("capacity", Status.ok, f"through a transaction pooler: {hosts} host(s) registered")]
    room = limit - COORDINATOR_CONNECTIONS - hosts
    detail = (
        f"{hosts} host(s) registered, PostgreSQL allows {limit} connections, about {COORDINATOR_CONNECTIONS} of "
        f"them the coordinator's: room for about {max(room, 0)} more Mac(s) connecting directly"
    )
    fix = (
        "" if room > 0 else "put PgBouncer in front and use the pooled worker login (docs/fleet.md, more than ~80 Macs)"
    )
    return [Check("capacity", Status.ok if room > 0 else Status.info, detail, fix)]


def _login_check(conn) -> list[Check]:
    with Session(bind=conn) as s:
        who = identity(s)
    if who is None:
        return []
    if who.worker_role and who.host == POOLED_HOST:
        pooled = env_setting("database_pooled")
        return [
            Check(
                "login",
                Status.ok if pooled else Status.fail,
                f"{who.login}, the fleet's pooled worker login: acts as the host its worker names",
                "" if pooled else "it is for Macs behind PgBouncer: set SILICONBENCH_DATABASE_POOLED=1 (docs/fleet.md)",
            )
        ]
    if who.worker_role:
        return [
            Check(
                "login",
                Status.ok if who.host else Status.fail,
                f"{who.login}, a worker login bound to host {who.host!r}"
                if who.host
                else f"{who.login} is a worker login with no host bound to it in this database",
                "" if who.host else "on the coordinator: `siliconbench db worker-role HOST`",
            )
        ]
    return [
        Check(
            "login",
            Status.info,
            f"{who.login} is not a worker login: it may change every table",
            "give this Mac its own: `siliconbench db worker-role HOST` on the coordinator, and use its URL",
        )
    ]
