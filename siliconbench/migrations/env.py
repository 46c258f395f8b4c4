"""Alembic environment, run by ``siliconbench db upgrade`` (siliconbench.storage.database) or ``alembic upgrade head``.

siliconbench.storage.database passes its own connection in ``config.attributes["connection"]``; the alembic
command line gets the URL from SILICONBENCH_DATABASE_URL (or the embedded SQLite file).
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection

from siliconbench.contract.settings import load_settings

from siliconbench.storage import watch_tables  # noqa: F401  (its tables join Base.metadata)
from siliconbench.storage.database import make_engine
from siliconbench.storage.tables import Base, UTCDateTime

config = context.config
if config.config_file_name is not None:  # the alembic command line, with alembic.ini
    fileConfig(config.config_file_name, disable_existing_loggers=False)
target_metadata = Base.metadata


def database_url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url

    return load_settings().resolved_database_url


def render_item(type_, obj, autogen_context):
    """Migrations spell column types with sqlalchemy only, never with coordinator's own classes."""
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


OPTIONS = dict(target_metadata=target_metadata, render_as_batch=True, compare_type=True, render_item=render_item)


def run(connection: Connection) -> None:
    # siliconbench.storage.database makes SQLAlchemy emit BEGIN on SQLite, so its DDL is transactional as well.
    context.configure(connection=connection, transactional_ddl=True, **OPTIONS)
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    context.configure(url=database_url(), literal_binds=True, dialect_opts={"paramstyle": "named"}, **OPTIONS)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        run(connection)
        return
    engine = make_engine(database_url(), foreign_keys=False)  # batch migrations copy tables on SQLite
    try:
        with engine.connect() as conn:
            run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
