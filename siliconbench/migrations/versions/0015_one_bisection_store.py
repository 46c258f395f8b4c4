"""One store for every bisection: ``regressions bisect`` on one machine keeps its search in the ``bisections`` table
too (no campaign, no finding required), with the search's whole state (``search``: the state machine of
``siliconbench.coordinator.bisection.search``, so an interrupted run resumes), which runner drives it (``runner``: fleet or
local) and what a local run builds with (``options``). A finding may be bisected more than once (the unique index
on finding_id becomes a plain one; the watch still starts one a finding). A host's report on a campaign's prepare
task echoes what it was asked to make (``campaign_hosts.request``: a build's ref), so a bisection takes a report for
the commit it sent, never a redelivered older task's. A finding's confirmation that could not tell leaves it
``inconclusive`` (a new status), no longer ``not_confirmed``.

Revision ID: 0015
Revises: 0014
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: Union[str, Sequence[str], None] = "0014"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
STATUSES_BEFORE = ("open", "confirming", "confirmed", "not_confirmed", "dismissed")
STATUSES_AFTER = ("open", "confirming", "confirmed", "not_confirmed", "inconclusive", "dismissed")


def _finding_statuses(statuses: tuple[str, ...]) -> None:
    """Replace the findings' status CHECK (batch mode: SQLite rebuilds the table; PostgreSQL alters it)."""
    with op.batch_alter_table("findings") as batch:
        batch.drop_constraint(op.f("ck_findings_status"), type_="check")
        batch.create_check_constraint("status", f"status IN ({', '.join(repr(k) for k in statuses)})")


def upgrade() -> None:
    op.drop_index("ix_bisections_finding_id", table_name="bisections")
    with op.batch_alter_table("bisections") as batch:
        batch.alter_column("campaign_id", existing_type=ID, nullable=True)
        batch.alter_column("finding_id", existing_type=sa.Integer(), nullable=True)
        batch.add_column(sa.Column("runner", sa.String(), server_default="fleet", nullable=False))
        batch.add_column(sa.Column("search", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("options", sa.JSON(), nullable=True))
    op.create_index("ix_bisections_finding_id", "bisections", ["finding_id"])
    with op.batch_alter_table("campaign_hosts") as batch:
        batch.add_column(sa.Column("request", sa.String(), nullable=True))
    _finding_statuses(STATUSES_AFTER)


def downgrade() -> None:
    op.execute("UPDATE findings SET status = 'open' WHERE status = 'inconclusive'")  # to be confirmed again
    _finding_statuses(STATUSES_BEFORE)
    with op.batch_alter_table("campaign_hosts") as batch:
        batch.drop_column("request")
    op.execute("DELETE FROM bisections WHERE campaign_id IS NULL OR finding_id IS NULL")  # a local run's rows
    op.drop_index("ix_bisections_finding_id", table_name="bisections")
    with op.batch_alter_table("bisections") as batch:
        batch.drop_column("options")
        batch.drop_column("search")
        batch.drop_column("runner")
        batch.alter_column("finding_id", existing_type=sa.Integer(), nullable=False)
        batch.alter_column("campaign_id", existing_type=ID, nullable=False)
    op.create_index("ix_bisections_finding_id", "bisections", ["finding_id"], unique=True)
