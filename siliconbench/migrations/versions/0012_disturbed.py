"""One name per idea for the gates: results.disturbed (was throttled), result_summaries.disturbed, extra.busy

The two gates before a job are the thermal gate (verdict: throttled) and the busy gate (verdict: contended); a result
with either verdict is *disturbed*. The results column that held "throttled or contended" was named throttled, and
the busy gate's record was stored as extra.contention. Both are renamed; indexes (and PostgreSQL's INCLUDE columns,
policies and grants) follow a column rename. SQLite renames a column natively since 3.25.

Revision ID: 0012
Revises: 0011
"""

from typing import Sequence, Union

from alembic import op

revision: str = "0012"
down_revision: Union[str, Sequence[str], None] = "0011"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _rename_key(old: str, new: str) -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"UPDATE results SET extra = ((extra::jsonb - '{old}') || jsonb_build_object('{new}', "
            f"extra::jsonb -> '{old}'))::json WHERE jsonb_exists(extra::jsonb, '{old}')"
        )
    else:
        op.execute(
            f"UPDATE results SET extra = json_remove(json_set(extra, '$.{new}', json(json_extract(extra, "
            f"'$.{old}'))), '$.{old}') WHERE json_type(extra, '$.{old}') IS NOT NULL"
        )


def _rename_columns(old: str, new: str) -> None:
    for table in ("results", "result_summaries"):
        op.execute(f"ALTER TABLE {table} RENAME COLUMN {old} TO {new}")


def upgrade() -> None:
    _rename_columns("throttled", "disturbed")
    _rename_key("contention", "busy")


def downgrade() -> None:
    _rename_key("busy", "contention")
    _rename_columns("disturbed", "throttled")
