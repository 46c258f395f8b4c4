"""What a host is doing besides a job: hosts.activity (a model being fetched, with its progress)

A worker that lacks a sweep's model fetches it before its first job (siliconbench/worker/models/fetch.py) and reports the
download here, so `siliconbench workers` and the Fleet page show it; NULL when it does nothing of the kind.

Revision ID: 0010
Revises: 0009
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: Union[str, Sequence[str], None] = "0009"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table("hosts") as batch:
        batch.add_column(sa.Column("activity", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hosts") as batch:
        batch.drop_column("activity")
