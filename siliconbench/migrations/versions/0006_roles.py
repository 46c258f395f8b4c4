"""Least privilege (PostgreSQL only): a coordinator role, a worker role that can do only what a worker does,
and worker_logins, which binds each worker login to the one host it may act as

The worker role may register and heartbeat its own host, claim jobs (queued, its own, or with an expired
lease, and only those not pinned to another host), write results, samples and attempt records for jobs it
holds, and read what it runs. It has no DDL (PostgreSQL 15 gives PUBLIC no CREATE on the public schema; we
revoke it for older servers), no DELETE anywhere, no UPDATE of results. Row-level security enforces "its
own": the host bound to the login (siliconbench_worker_host()) must be the row's. The coordinator role has
DML on every table, no DDL; migrations run as the database owner, which row-level security does not bind.
Both are NOLOGIN group roles: `siliconbench db worker-role HOST` makes a login (siliconbench.storage.roles). Roles are
shared by the whole server, so they are created only if missing and the downgrade leaves them.

Revision ID: 0006
Revises: 0005
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: Union[str, Sequence[str], None] = "0005"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

WORKER, COORDINATOR = "siliconbench_worker", "siliconbench_coordinator"
ME = "siliconbench_worker_host()"
# A job the worker holds (or held last): its latest claim is the worker's. Not "and still running": the check is
# made before ON CONFLICT, so a redelivered result of a finished job must pass it to stay a no-op.
HOLDS = f"EXISTS (SELECT 1 FROM jobs j WHERE j.id = job_id AND j.worker = {ME})"
# Row-level security per table: (command, USING, WITH CHECK) for the worker; the coordinator sees all.
WORKER_POLICIES = {
    "hosts": [("SELECT", "true", None), ("INSERT", None, f"name = {ME}"), ("UPDATE", f"name = {ME}", f"name = {ME}")],
    "jobs": [
        ("SELECT", "true", None),
        (
            "UPDATE",
            f"(target_host IS NULL OR target_host = {ME}) AND "
            f"(status = 'queued' OR worker = {ME} OR lease_expires_at < now())",
            f"worker = {ME}",
        ),
    ],
    "results": [("SELECT", "true", None), ("INSERT", None, HOLDS)],
    "samples": [("SELECT", "true", None), ("INSERT", None, HOLDS)],
    "job_attempts": [("SELECT", "true", None), ("INSERT", None, f"worker = {ME}")],
}
WORKER_GRANTS = [
    "SELECT ON sweeps, jobs, results, samples, job_attempts, hosts, worker_logins, alembic_version",
    "INSERT, UPDATE ON hosts",
    # The columns a claim, a renewal, a requeue and a result change; never the job's spec, sweep or target.
    "UPDATE (status, worker, host, attempts, started_at, lease_expires_at, finished_at, error, enqueued_at) ON jobs",
    "INSERT ON results, samples, job_attempts",
]


def _create_role(name: str) -> None:
    op.execute(
        f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{name}') THEN "
        f"CREATE ROLE {name} NOLOGIN; END IF; "
        f"EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    )


def upgrade() -> None:
    op.create_table(
        "worker_logins",
        sa.Column("login", sa.String(), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.text("(CURRENT_TIMESTAMP)"), nullable=False
        ),
        sa.PrimaryKeyConstraint("login", name=op.f("pk_worker_logins")),
    )
    if op.get_bind().dialect.name != "postgresql":
        return  # the embedded SQLite file has one user: the process that runs the sweep
    _create_role(WORKER)
    _create_role(COORDINATOR)
    op.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    op.execute(
        "CREATE FUNCTION siliconbench_worker_host() RETURNS text LANGUAGE sql STABLE "
        "AS $$ SELECT host FROM worker_logins WHERE login = current_user $$"
    )
    for grant in WORKER_GRANTS:
        op.execute(f"GRANT {grant} TO {WORKER}")
    op.execute(f"GRANT USAGE ON SEQUENCE samples_id_seq TO {WORKER}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {COORDINATOR}")
    op.execute(f"REVOKE INSERT, UPDATE, DELETE ON alembic_version, worker_logins FROM {COORDINATOR}")
    op.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {COORDINATOR}")
    # Tables of later migrations, made by the same owner, are the coordinator's to use as well.
    op.execute(
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {COORDINATOR}"
    )
    op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {COORDINATOR}")
    for table, policies in WORKER_POLICIES.items():
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"CREATE POLICY coordinator_all ON {table} TO {COORDINATOR} USING (true) WITH CHECK (true)")
        for command, using, check in policies:
            clauses = (f" USING ({using})" if using else "") + (f" WITH CHECK ({check})" if check else "")
            op.execute(f"CREATE POLICY worker_{command.lower()} ON {table} FOR {command} TO {WORKER}{clauses}")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table, policies in WORKER_POLICIES.items():
            for command, _, _ in policies:
                op.execute(f"DROP POLICY worker_{command.lower()} ON {table}")
            op.execute(f"DROP POLICY coordinator_all ON {table}")
            op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM {COORDINATOR}")
        op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES FROM {COORDINATOR}")
        for role in (WORKER, COORDINATOR):
            op.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}")
            op.execute(f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {role}")
        op.execute("DROP FUNCTION siliconbench_worker_host()")
    op.drop_table("worker_logins")
