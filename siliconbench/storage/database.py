"""Engines, sessions and schema migrations of the coordinator's database (SQLite or PostgreSQL).

Migrations are the only thing that creates tables: ``upgrade(url)`` runs them (``siliconbench db
upgrade``), and everything that reads or writes calls ``ready(url)`` (SQLite migrates itself) or
``require_current(url)`` first, so an old or empty PostgreSQL database is a one-line error instead of a
traceback from the middle of a query.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, create_engine, event, exc, inspect, make_url
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool, StaticPool

from siliconbench.contract.errors import UserError
from siliconbench.contract.settings import env_setting

from .outages import Outage, call_through

if TYPE_CHECKING:  # alembic is imported only to migrate (HEAD below)
    from alembic.config import Config

URL_VAR = "SILICONBENCH_DATABASE_URL"
# The newest migration's revision (tests/storage/test_storage.py checks it is alembic's head). Every process that
# opens the database compares it with the table's; knowing it here spares each of them importing alembic and
# loading every migration script (~0.3 s of CPU a process: a CLI call, a worker, the scheduler). Alembic is
# imported only to migrate, or to tell an older revision from an unknown one.
HEAD = "0017"
SQLITE_BUSY_TIMEOUT_S = 30

_engines: dict[str, Engine] = {}
_lock = threading.Lock()
_hold_no_idle = False  # hold_no_idle_connections()


def normalize_url(url: str | URL) -> URL:
    """``postgresql://`` and ``postgres://`` mean psycopg 3 (the driver siliconbench ships with)."""
    try:
        u = make_url(url)
    except exc.ArgumentError:
        raise UserError(URL_VAR, f"{url!r} is not a database URL (sqlite:///path or postgresql://...).") from None
    if u.drivername in ("postgresql", "postgres"):
        u = u.set(drivername="postgresql+psycopg")
    return u


def as_application(url: str, name: str) -> str:
    """``url`` with PostgreSQL's application_name set to ``name``: a worker's connections show as its host in
    pg_stat_activity, and the pooled worker login (migration 0017) acts as that host. Other databases: unchanged."""
    u = normalize_url(url)
    if u.get_backend_name() != "postgresql":
        return url
    return u.set(query={**u.query, "application_name": name}).render_as_string(hide_password=False)


def shown(url: str | URL) -> str:
    """The URL for messages, password hidden."""
    return normalize_url(url).render_as_string(hide_password=True)


def _in_memory(u: URL) -> bool:
    return u.get_backend_name() == "sqlite" and u.database in (None, "", ":memory:")


def make_engine(url: str | URL, *, foreign_keys: bool = True) -> Engine:
    """A new engine. SQLite gets WAL, a busy timeout, enforced foreign keys and real transactions."""
    u = normalize_url(url)
    try:
        if u.get_backend_name() != "sqlite":
            # Through a transaction pooler no statement is prepared on the server (psycopg prepares a query it
            # has run 5 times): the next transaction may run on another server connection.
            pooled = {"connect_args": {"prepare_threshold": None}} if env_setting("database_pooled") else {}
            if _hold_no_idle:
                return create_engine(u, poolclass=NullPool, **pooled)
            return create_engine(u, pool_pre_ping=True, **pooled)
        memory = _in_memory(u)
        engine = create_engine(
            u,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_S},
            **({"poolclass": StaticPool} if memory else {}),
        )
    except (ImportError, exc.NoSuchModuleError) as e:
        raise UserError(
            URL_VAR, f"no driver for {shown(u)} ({e}); PostgreSQL needs `pip install 'siliconbench[postgres]'`."
        ) from None

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        # sqlite3's legacy mode does not BEGIN before SELECT, DDL or SAVEPOINT; SQLAlchemy emits BEGIN itself.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_S * 1000}")
        cur.execute(f"PRAGMA foreign_keys = {'ON' if foreign_keys else 'OFF'}")
        if not memory:
            cur.execute("PRAGMA journal_mode = WAL")  # readers (the dashboard) do not block the writer
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        conn.exec_driver_sql("BEGIN")

    return engine


def hold_no_idle_connections() -> None:
    """From now on this process's engines keep no connection between uses (a worker: its one held connection,
    storage.hot_path, carries its every frequent statement; a rare one connects for itself). Engines made before
    are disposed."""
    global _hold_no_idle
    _hold_no_idle = True
    dispose()


def engine_for(url: str | URL) -> Engine:
    """The process-wide engine of ``url`` (one pool per database)."""
    key = normalize_url(url).render_as_string(hide_password=False)
    with _lock:
        engine = _engines.get(key)
        if engine is None:
            engine = _engines[key] = make_engine(key)
        return engine


def dispose(url: str | URL | None = None) -> None:
    """Close the pooled connections of one cached engine (or all) and forget it."""
    with _lock:
        keys = list(_engines) if url is None else [normalize_url(url).render_as_string(hide_password=False)]
        for key in keys:
            engine = _engines.pop(key, None)
            if engine is not None:
                engine.dispose()


@contextmanager
def session_scope(url: str | URL) -> Iterator[Session]:
    """One transaction: committed when the block ends, rolled back if it raises."""
    with Session(engine_for(url), expire_on_commit=False) as session, session.begin():
        yield session


def alembic_config(url: str | URL) -> Config:
    """Alembic's configuration, built in code: no alembic.ini is needed."""
    from alembic.config import Config

    cfg = Config()
    # Located, not imported: the migrations import this module (their env.py), never the other way round.
    where = importlib.util.find_spec("siliconbench.migrations").submodule_search_locations
    cfg.set_main_option("script_location", str(Path(list(where)[0])))
    cfg.set_main_option("sqlalchemy.url", normalize_url(url).render_as_string(hide_password=False).replace("%", "%%"))
    return cfg


def _migrate(url: str | URL, fn, revision: str) -> None:
    u = normalize_url(url)
    sqlite = u.get_backend_name() == "sqlite"
    # Batch migrations on SQLite copy and drop tables: foreign keys must be off (PRAGMA is a no-op
    # inside a transaction, so a dedicated engine), and are checked before the commit instead.
    own = sqlite and not _in_memory(u)
    engine = make_engine(u, foreign_keys=False) if own else engine_for(u)
    try:
        with engine.begin() as conn:
            cfg = alembic_config(u)
            cfg.attributes["connection"] = conn
            fn(cfg, revision)
            if sqlite:
                bad = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if bad:
                    raise RuntimeError(f"migration to {revision} left rows with dangling foreign keys: {bad[:5]}")
    finally:
        if own:
            engine.dispose()


def upgrade(url: str | URL, revision: str = "head") -> None:
    from alembic import command

    _migrate(url, command.upgrade, revision)


def downgrade(url: str | URL, revision: str) -> None:
    """Down to ``revision``; down to "base" also drops alembic's own version table: nothing is left."""

    from alembic import command

    def run(cfg: Config, rev: str) -> None:
        command.downgrade(cfg, rev)
        if rev == "base":
            cfg.attributes["connection"].exec_driver_sql("DROP TABLE IF EXISTS alembic_version")

    _migrate(url, run, revision)


def head_revision() -> str:
    return HEAD


def known_revisions() -> set[str]:
    """Every revision of the migration scripts, read by alembic (which loads each script)."""
    from alembic.script import ScriptDirectory

    return {s.revision for s in ScriptDirectory.from_config(alembic_config("sqlite://")).walk_revisions()}


def revision_of(conn: Connection) -> str | None:
    """The schema revision in alembic's version table (what alembic's MigrationContext reads); None without one."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


def current_revision(url: str | URL) -> str | None:
    """The schema revision the database is at; None for a database siliconbench never migrated."""
    with engine_for(url).connect() as conn:
        return revision_of(conn)


def ready(url: str | URL) -> None:
    """Make ``url`` usable or say why not. SQLite is the embedded database, whatever file holds it and however it
    is named (the default or SILICONBENCH_DATABASE_URL): nothing else owns it, so it is migrated to head on
    first use. PostgreSQL is shared by a fleet and must be current already (`siliconbench db upgrade`)."""
    if normalize_url(url).get_backend_name() == "sqlite":
        try:
            current = current_revision(url)
        except exc.DBAPIError as e:
            raise UserError(URL_VAR, f"cannot open the database {shown(url)}: {e.orig}".rstrip() + ".") from None
        # never "upgrade" a file a newer siliconbench migrated
        if current != HEAD and (current is None or current in known_revisions()):
            upgrade(url)
    require_current(url)


def require_current(url: str | URL) -> None:
    """Raise UserError(SILICONBENCH_DATABASE_URL) unless the database is reachable and at head."""
    try:
        current = current_revision(url)
    except exc.DBAPIError as e:
        raise UserError(URL_VAR, f"cannot open the database {shown(url)}: {e.orig}".rstrip() + ".") from None
    head = head_revision()
    if current == head:
        return
    if current is None:
        msg = f"the database {shown(url)} has no siliconbench tables yet; run `siliconbench db upgrade`."
    else:
        if current not in known_revisions():
            msg = (
                f"the database {shown(url)} is at schema revision {current!r}, which this siliconbench does "
                "not know (a newer version migrated it); upgrade siliconbench."
            )
        else:
            msg = (
                f"the database {shown(url)} is at schema revision {current!r} but this siliconbench needs "
                f"{head!r}; run `siliconbench db upgrade`."
            )
    raise UserError(URL_VAR, msg)


# What an unreachable server says, as opposed to one that answered and refused (a wrong password, no such
# database): those stay a clear error at once, since waiting would not mend them.
_REFUSED = ("authentication failed", "does not exist", "no password supplied", "permission denied")


def wait_until_current(url: str | URL, name: str, log: logging.Logger) -> None:
    """``require_current``, but a server that cannot be reached yet is waited for (one log line when the wait
    starts, one when it ends, capped backoff), as a long-running process (a worker, the reconciler) must."""

    def probe() -> None:
        try:
            current_revision(url)
        except exc.OperationalError as e:
            if any(r in str(e.orig).lower() for r in _REFUSED):
                require_current(url)  # raises the clear error
            raise

    call_through(probe, Outage(name, log), max_backoff_s=30.0)
    require_current(url)
