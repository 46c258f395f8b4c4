"""fleet: where each job was sent and when, for routing and the reconciler

Revision ID: 0002
Revises: 0001
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: Union[str, Sequence[str], None] = "0001"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("target_host", sa.String(), nullable=True))
        batch.add_column(sa.Column("queue", sa.String(), nullable=True))
        batch.add_column(sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_index("ix_jobs_status_lease", ["status", "lease_expires_at"])


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_status_lease")
        batch.drop_column("enqueued_at")
        batch.drop_column("queue")
        batch.drop_column("target_host")
