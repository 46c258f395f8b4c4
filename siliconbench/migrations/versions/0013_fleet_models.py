"""Models the coordinator knows by itself: an operator publishes a model whose forms can be fetched (hf:, https://,
file:// origins), its manifest kept here; every worker fetches it before its first job, as from a peer's manifest.

Revision ID: 0013
Revises: 0012
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: Union[str, Sequence[str], None] = "0012"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "fleet_models",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("manifest", sa.JSON(), nullable=False),
        sa.Column("published_by", sa.String(), nullable=True),
        sa.Column(
            "published_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.current_timestamp()
        ),
    )


def downgrade() -> None:
    op.drop_table("fleet_models")
