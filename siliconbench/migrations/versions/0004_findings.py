"""findings: steps found in series' histories, with the confirmation sweep attached to each

Revision ID: 0004
Revises: 0002
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: Union[str, Sequence[str], None] = "0002"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "findings",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("series_id", sa.String(), nullable=False),
        sa.Column("series", sa.String(), nullable=False),
        sa.Column("series_key", sa.JSON(), nullable=False),
        sa.Column("metric", sa.String(), nullable=False),
        sa.Column("verdict", sa.String(), nullable=False),
        sa.Column("host", sa.String(), nullable=True),
        sa.Column("engine", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("before_job_id", sa.String(), nullable=False),
        sa.Column("after_job_id", sa.String(), nullable=False),
        sa.Column("before", sa.JSON(), nullable=False),
        sa.Column("after", sa.JSON(), nullable=False),
        sa.Column("changes", sa.JSON(), nullable=False),
        sa.Column("ratio", sa.Float(), nullable=True),
        sa.Column("p_value", sa.Float(), nullable=True),
        sa.Column("comparison", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(), server_default="open", nullable=False),
        sa.Column("confirm_sweep_id", sa.String(), nullable=True),
        sa.Column("confirm_result", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.current_timestamp(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('open', 'confirming', 'confirmed', 'not_confirmed', 'dismissed')",
            name=op.f("ck_findings_status"),
        ),
        sa.CheckConstraint("verdict IN ('regression', 'improvement')", name=op.f("ck_findings_verdict")),
        sa.ForeignKeyConstraint(
            ["confirm_sweep_id"], ["sweeps.id"], name=op.f("fk_findings_confirm_sweep_id_sweeps"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_findings")),
    )
    with op.batch_alter_table("findings", schema=None) as batch_op:
        batch_op.create_index("ix_findings_key", ["key"], unique=True)
        batch_op.create_index("ix_findings_series_id_metric", ["series_id", "metric"], unique=False)
        batch_op.create_index("ix_findings_status", ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("findings", schema=None) as batch_op:
        batch_op.drop_index("ix_findings_status")
        batch_op.drop_index("ix_findings_series_id_metric")
        batch_op.drop_index("ix_findings_key")
    op.drop_table("findings")
