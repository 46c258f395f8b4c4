"""A pooled worker login, for a fleet behind a transaction pooler (PgBouncer): one login every Mac may use, bound to
the host ``*`` in ``worker_logins``. Row-level security takes its host from the connection's ``application_name``,
which each worker sets to its own name and PgBouncer carries to whichever server connection runs its transaction.
A per-host login (one PgBouncer pool, so one server connection, per Mac) would defeat the pooler.

What such a login may do is the worker role's (no DDL, no DELETE, no change of a result); what it may not do is be
held to one host: it names its host itself. Connected directly without an application_name it may write nothing
(NULL matches no row); through PgBouncer a connection that names none keeps the name its server connection last
carried. A per-host login is unchanged.

Revision ID: 0017
Revises: 0016
"""

from typing import Sequence, Union

from alembic import op

revision: str = "0017"
down_revision: Union[str, Sequence[str], None] = "0016"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

POOLED = (
    "CREATE OR REPLACE FUNCTION siliconbench_worker_host() RETURNS text LANGUAGE plpgsql STABLE AS $$ "
    "BEGIN RETURN (SELECT CASE WHEN host = '*' THEN nullif(current_setting('application_name', true), '') "
    "ELSE host END FROM worker_logins WHERE login = current_user); END $$"
)
PLPGSQL = (
    "CREATE OR REPLACE FUNCTION siliconbench_worker_host() RETURNS text LANGUAGE plpgsql STABLE AS $$ "
    "BEGIN RETURN (SELECT host FROM worker_logins WHERE login = current_user); END $$"
)  # as 0009


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(POOLED)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DELETE FROM worker_logins WHERE host = '*'")
        op.execute(PLPGSQL)
