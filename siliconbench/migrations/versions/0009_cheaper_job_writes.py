"""Cheaper claims and result writes: two redundant indexes on jobs dropped, the worker's host looked up by a
plpgsql function

Every claim and every result updates a jobs row and changes its status, so no update is HOT and each one writes
an entry into every index of jobs. Two of them were prefixes of others, which serve the same lookups:
ix_jobs_status of ix_jobs_status_lease (status, lease_expires_at), ix_jobs_model_engine_quant of
ix_jobs_duration_key (model, engine, quant, n_prompt, n_gen, n_depth, created_at).

siliconbench_worker_host(), which every row-level security check of a worker login calls, becomes plpgsql: a
plain SQL function with a FROM clause is not inlined and plans its query again at each statement that calls
it, where plpgsql keeps the plan for the session (benchmarks/plumbing.py measures the writes).

Revision ID: 0009
Revises: 0008
"""

from typing import Sequence, Union

from alembic import op

revision: str = "0009"
down_revision: Union[str, Sequence[str], None] = "0008"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

PLPGSQL = (
    "CREATE OR REPLACE FUNCTION siliconbench_worker_host() RETURNS text LANGUAGE plpgsql STABLE AS $$ "
    "BEGIN RETURN (SELECT host FROM worker_logins WHERE login = current_user); END $$"
)
SQL = (
    "CREATE OR REPLACE FUNCTION siliconbench_worker_host() RETURNS text LANGUAGE sql STABLE "
    "AS $$ SELECT host FROM worker_logins WHERE login = current_user $$"
)  # as 0006


def upgrade() -> None:
    op.drop_index("ix_jobs_status", table_name="jobs")
    op.drop_index("ix_jobs_model_engine_quant", table_name="jobs")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(PLPGSQL)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(SQL)
    op.create_index("ix_jobs_model_engine_quant", "jobs", ["model", "engine", "quant"], unique=False)
    op.create_index("ix_jobs_status", "jobs", ["status"], unique=False)
