"""results: Darwin's phys_footprint peak and baseline, and whether the job ran throttled

Revision ID: 0005
Revises: 0004
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

revision: str = "0005"
down_revision: Union[str, Sequence[str], None] = "0004"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("peak_footprint_bytes", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("baseline_footprint_bytes", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("throttled", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.drop_column("throttled")
        batch.drop_column("baseline_footprint_bytes")
        batch.drop_column("peak_footprint_bytes")
