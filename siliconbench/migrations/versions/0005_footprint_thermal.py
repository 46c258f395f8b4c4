"""results: Darwin's phys_footprint peak and baseline, and whether the job ran throttled; jobs: interruptions
(claims ended by the worker's death, not counted as the job's attempts) and job_attempts (how each ended);
sweeps: owner (the process running an embedded sweep)

Revision ID: 0005
Revises: 0004
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: Union[str, Sequence[str], None] = "0004"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("peak_footprint_bytes", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("baseline_footprint_bytes", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("throttled", sa.Boolean(), nullable=True))
    with op.batch_alter_table("sweeps") as batch:
        batch.add_column(sa.Column("owner", sa.String(), nullable=True))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("interruptions", sa.Integer(), server_default="0", nullable=False))
    op.create_table(
        "job_attempts",
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(), nullable=True),
        sa.Column("host", sa.String(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cause", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_attempts_job_id_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "attempt", name=op.f("pk_job_attempts")),
    )


def downgrade() -> None:
    op.drop_table("job_attempts")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("interruptions")
    with op.batch_alter_table("sweeps") as batch:
        batch.drop_column("owner")
    with op.batch_alter_table("results") as batch:
        batch.drop_column("throttled")
        batch.drop_column("baseline_footprint_bytes")
        batch.drop_column("peak_footprint_bytes")
