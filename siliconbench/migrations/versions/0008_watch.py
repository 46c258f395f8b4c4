"""The regression watch: watches, watch_checks, watch_versions, campaigns, campaign_hosts, suspect_hosts and the
notifications outbox (siliconbench.storage.watch_tables)

A worker reads the campaigns and writes only its own host's row of campaign_hosts (the engine environment it
made for a campaign's candidate); everything else is the coordinator's.

Revision ID: 0008
Revises: 0007
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: Union[str, Sequence[str], None] = "0007"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

WORKER, COORDINATOR = "siliconbench_worker", "siliconbench_coordinator"
ME = "siliconbench_worker_host()"  # as 0006
NOW = sa.text("(CURRENT_TIMESTAMP)")
TABLES = ("notifications", "suspect_hosts", "campaign_hosts", "campaigns", "watch_versions", "watch_checks", "watches")


def _ts(name: str, nullable: bool = True, default: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), server_default=NOW if default else None, nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "watches",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        _ts("created_at", nullable=False, default=True),
        _ts("last_checked_at"),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_watches")),
    )
    op.create_table(
        "watch_checks",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("watch", sa.String(), nullable=False),
        sa.Column("checker", sa.String(), nullable=False),
        _ts("started_at", nullable=False, default=True),
        _ts("finished_at"),
        sa.Column("versions", sa.JSON(), nullable=False),
        sa.Column("new_campaigns", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["watch"], ["watches.name"], name=op.f("fk_watch_checks_watch_watches"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_watch_checks")),
    )
    op.create_index("ix_watch_checks_watch_started_at", "watch_checks", ["watch", "started_at"])
    op.create_table(
        "watch_versions",
        sa.Column("watch", sa.String(), nullable=False),
        sa.Column("package", sa.String(), nullable=False),
        sa.Column("version", sa.String(), nullable=False),
        _ts("first_seen_at", nullable=False, default=True),
        sa.Column("campaign_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["watch"], ["watches.name"], name=op.f("fk_watch_versions_watch_watches"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("watch", "package", "version", name=op.f("pk_watch_versions")),
    )
    op.create_table(
        "campaigns",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("watch", sa.String(), nullable=False),
        sa.Column("package", sa.String(), nullable=False),
        sa.Column("engine", sa.String(), nullable=False),
        sa.Column("baseline", sa.String(), nullable=False),
        sa.Column("candidate", sa.String(), nullable=False),
        sa.Column("status", sa.String(), server_default="preparing", nullable=False),
        sa.Column("hosts", sa.JSON(), nullable=False),
        sa.Column("look", sa.Integer(), server_default="0", nullable=False),
        sa.Column("sweep_ids", sa.JSON(), nullable=False),
        sa.Column("verdicts", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        _ts("created_at", nullable=False, default=True),
        _ts("updated_at"),
        sa.CheckConstraint("status IN ('preparing', 'running', 'done', 'failed')", name=op.f("ck_campaigns_status")),
        sa.ForeignKeyConstraint(
            ["watch"], ["watches.name"], name=op.f("fk_campaigns_watch_watches"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_campaigns")),
    )
    op.create_index("ix_campaigns_watch_package_candidate", "campaigns", ["watch", "package", "candidate"], unique=True)
    op.create_index("ix_campaigns_status", "campaigns", ["status"])
    op.create_table(
        "campaign_hosts",
        sa.Column("campaign_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("status", sa.String(), server_default="pending", nullable=False),
        sa.Column("env_name", sa.String(), nullable=True),
        sa.Column("packages", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        _ts("reported_at"),
        sa.CheckConstraint("status IN ('pending', 'ready', 'failed')", name=op.f("ck_campaign_hosts_status")),
        sa.ForeignKeyConstraint(
            ["campaign_id"], ["campaigns.id"], name=op.f("fk_campaign_hosts_campaign_id_campaigns"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("campaign_id", "host", name=op.f("pk_campaign_hosts")),
    )
    op.create_table(
        "suspect_hosts",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("sku", sa.String(), nullable=False),
        sa.Column("campaign_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("series", sa.String(), nullable=False),
        sa.Column("metric", sa.String(), nullable=False),
        sa.Column("ratio", sa.Float(), nullable=True),
        sa.Column("ci_low", sa.Float(), nullable=True),
        sa.Column("ci_high", sa.Float(), nullable=True),
        sa.Column("peers", sa.JSON(), nullable=False),
        sa.Column("job_ids", sa.JSON(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        _ts("created_at", nullable=False, default=True),
        _ts("cleared_at"),
        sa.ForeignKeyConstraint(
            ["campaign_id"], ["campaigns.id"], name=op.f("fk_suspect_hosts_campaign_id_campaigns"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_suspect_hosts")),
    )
    op.create_index("ix_suspect_hosts_key", "suspect_hosts", ["key"], unique=True)
    op.create_index("ix_suspect_hosts_host", "suspect_hosts", ["host"])
    op.create_table(
        "notifications",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("url", sa.String(), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        _ts("created_at", nullable=False, default=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        _ts("next_attempt_at"),
        _ts("delivered_at"),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "kind IN ('finding', 'suspect_host', 'campaign_failed')", name=op.f("ck_notifications_kind")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notifications")),
    )
    op.create_index("ix_notifications_key", "notifications", ["key"], unique=True)
    op.create_index(
        "ix_notifications_delivered_at_next_attempt_at", "notifications", ["delivered_at", "next_attempt_at"]
    )
    if op.get_bind().dialect.name != "postgresql":
        return
    # The coordinator has DML on these through 0006's default privileges; the worker reads campaigns and
    # writes its own host's campaign_hosts row, nothing else of the watch.
    op.execute(f"GRANT SELECT ON watches, campaigns, campaign_hosts TO {WORKER}")
    op.execute(f"GRANT INSERT, UPDATE ON campaign_hosts TO {WORKER}")
    op.execute("ALTER TABLE campaign_hosts ENABLE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY coordinator_all ON campaign_hosts TO {COORDINATOR} USING (true) WITH CHECK (true)")
    op.execute(f"CREATE POLICY worker_select ON campaign_hosts FOR SELECT TO {WORKER} USING (true)")
    op.execute(f"CREATE POLICY worker_insert ON campaign_hosts FOR INSERT TO {WORKER} WITH CHECK (host = {ME})")
    op.execute(
        f"CREATE POLICY worker_update ON campaign_hosts FOR UPDATE TO {WORKER} USING (host = {ME}) "
        f"WITH CHECK (host = {ME})"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for policy in ("worker_update", "worker_insert", "worker_select", "coordinator_all"):
            op.execute(f"DROP POLICY {policy} ON campaign_hosts")
        for role in (WORKER, COORDINATOR):
            op.execute(f"REVOKE ALL ON {', '.join(TABLES)} FROM {role}")
    for table in TABLES:
        op.drop_table(table)
