"""Bisections on the fleet, and their end as a notification kind: a regression the watch confirmed between two llama.cpp tags, searched to its commit on
the host that confirmed it (siliconbench.storage.watch_tables.Bisection). The coordinator's alone: a worker builds a step's
commit through the campaign's prepare task and runs its jobs, and never reads or writes this table.

Revision ID: 0014
Revises: 0013
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: Union[str, Sequence[str], None] = "0013"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

NOW = sa.text("(CURRENT_TIMESTAMP)")
KINDS_BEFORE = ("finding", "suspect_host", "campaign_failed")
KINDS_AFTER = (*KINDS_BEFORE, "bisection")  # a bisection's end is announced to the watch's webhook too


def _ts(name: str, nullable: bool = True, default: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), server_default=NOW if default else None, nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "bisections",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("campaign_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("finding_id", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("metric", sa.String(), nullable=False),
        sa.Column("min_effect", sa.Float(), nullable=False),
        sa.Column("suite", sa.JSON(), nullable=False),
        sa.Column("good", sa.JSON(), nullable=False),
        sa.Column("bad", sa.JSON(), nullable=False),
        sa.Column("commits", sa.JSON(), nullable=False),
        sa.Column("lo", sa.Integer(), server_default="-1", nullable=False),
        sa.Column("hi", sa.Integer(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("skipped", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(), server_default="building", nullable=False),
        sa.Column("current", sa.JSON(), nullable=False),
        sa.Column("steps", sa.JSON(), nullable=False),
        sa.Column("outcome", sa.String(), nullable=True),
        sa.Column("first_bad", sa.JSON(), nullable=True),
        sa.Column("effect", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        _ts("created_at", nullable=False, default=True),
        _ts("updated_at"),
        sa.CheckConstraint("status IN ('building', 'measuring', 'done', 'failed')", name=op.f("ck_bisections_status")),
        sa.ForeignKeyConstraint(
            ["campaign_id"], ["campaigns.id"], name=op.f("fk_bisections_campaign_id_campaigns"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bisections")),
    )
    op.create_index("ix_bisections_finding_id", "bisections", ["finding_id"], unique=True)
    op.create_index("ix_bisections_status", "bisections", ["status"])
    _notification_kinds(KINDS_AFTER)


def _notification_kinds(kinds: tuple[str, ...]) -> None:
    """Replace the notifications' kind CHECK (batch mode: SQLite rebuilds the table; PostgreSQL alters it)."""
    with op.batch_alter_table("notifications") as batch:
        batch.drop_constraint(op.f("ck_notifications_kind"), type_="check")
        batch.create_check_constraint("kind", f"kind IN ({', '.join(repr(k) for k in kinds)})")


def downgrade() -> None:
    op.execute("DELETE FROM notifications WHERE kind = 'bisection'")  # what the older CHECK cannot hold
    _notification_kinds(KINDS_BEFORE)
    op.drop_index("ix_bisections_status", table_name="bisections")
    op.drop_index("ix_bisections_finding_id", table_name="bisections")
    op.drop_table("bisections")
