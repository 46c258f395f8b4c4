"""A user's file too large to travel in each job (a serve workload's prompt dataset over 16 MiB) is stored once by its
digest: ``user_files`` (digest, size) and its bytes in ``user_file_chunks`` (8 MiB each, in order), read by the
workers (SELECT only), written by whoever stores the sweep.

Revision ID: 0016
Revises: 0015
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: Union[str, Sequence[str], None] = "0015"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

WORKER = "siliconbench_worker"


def upgrade() -> None:
    op.create_table(
        "user_files",
        sa.Column("digest", sa.String(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("stored_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.current_timestamp()),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_user_files")),
    )
    op.create_table(
        "user_file_chunks",
        sa.Column("digest", sa.String(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["digest"], ["user_files.digest"], name=op.f("fk_user_file_chunks_digest_user_files"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("digest", "seq", name=op.f("pk_user_file_chunks")),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"GRANT SELECT ON user_files, user_file_chunks TO {WORKER}")


def downgrade() -> None:
    op.drop_table("user_file_chunks")
    op.drop_table("user_files")
