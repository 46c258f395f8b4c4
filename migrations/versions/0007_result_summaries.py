"""result_summaries: each result's per-metric aggregate (n, mean, median, var, min, max over its measured
samples), written with the result and backfilled here for results stored before; result_identities (each
identity's first ok result: the Compare page's series are found among identities); results.engine_version
(the engine package's version, read once from the environment JSON); indexes for the dashboard's filters

The backfill computes every summary with siliconbench.aggregate.summarize (storage.summaries.backfill),
the same code that writes them for new results. Workers may insert summaries of jobs they hold, as samples.

Revision ID: 0007
Revises: 0006
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from storage.summaries import backfill

revision: str = "0007"
down_revision: Union[str, Sequence[str], None] = "0006"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

WORKER, COORDINATOR = "siliconbench_worker", "siliconbench_coordinator"
HOLDS = "EXISTS (SELECT 1 FROM jobs j WHERE j.id = job_id AND j.worker = siliconbench_worker_host())"  # as 0006
PACKAGES = {"llama.cpp": "llama-cpp-python", "mlx": "mlx-lm"}  # = siliconbench.results.ENGINE_PACKAGE today


def _engine_version_sql(dialect: str) -> str:
    def pkg(name: str) -> str:
        if dialect == "postgresql":
            return f"(environment::json -> 'packages' ->> '{name}')"
        return f"json_extract(environment, '$.packages.\"{name}\"')"
    whens = " ".join(f"WHEN '{e}' THEN {pkg(p)}" for e, p in PACKAGES.items())
    return (f"UPDATE results SET engine_version = (SELECT CASE jobs.engine {whens} END FROM jobs "
            f"WHERE jobs.id = results.job_id) WHERE environment IS NOT NULL")


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        "result_summaries",
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("metric", sa.String(), nullable=False),
        sa.Column("identity_hash", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("throttled", sa.Boolean(), nullable=True),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("mean", sa.Float(), nullable=False),
        sa.Column("median", sa.Float(), nullable=False),
        sa.Column("var", sa.Float(), nullable=False),
        sa.Column("min", sa.Float(), nullable=False),
        sa.Column("max", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["results.job_id"], name=op.f("fk_result_summaries_job_id_results"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "metric", name=op.f("pk_result_summaries")),
    )
    op.create_table(
        "result_identities",
        sa.Column("identity_hash", sa.String(), nullable=False),
        sa.Column("job_id", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["results.job_id"], name=op.f("fk_result_identities_job_id_results"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("identity_hash", name=op.f("pk_result_identities")),
    )
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("engine_version", sa.String(), nullable=True))
    op.execute(_engine_version_sql(dialect))
    op.create_index("ix_results_status_identity_hash_created_at", "results", ["status", "identity_hash", "created_at"],
                    postgresql_include=["throttled"])
    op.create_index("ix_results_created_at", "results", ["created_at"])
    op.create_index("ix_results_engine_version", "results", ["engine_version"])
    op.create_index("ix_jobs_duration_key", "jobs", ["model", "engine", "quant", "n_prompt", "n_gen", "n_depth",
                                                     "created_at"])
    op.create_index("ix_jobs_model_engine_created_at", "jobs", ["model", "engine", "created_at"])
    backfill(op.get_bind())
    # After the backfill: one sorted build, not 1.7M inserts into a growing index.
    op.create_index("ix_result_summaries_identity", "result_summaries", ["identity_hash", "metric", "status"],
                    postgresql_include=["throttled", "n", "mean", "median", "var", "min", "max"])
    if dialect == "postgresql":
        for table in ("result_summaries", "result_identities"):  # as samples: insert for jobs the worker holds
            op.execute(f"GRANT SELECT, INSERT ON {table} TO {WORKER}")
            op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {COORDINATOR}")
            op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
            op.execute(f"CREATE POLICY coordinator_all ON {table} TO {COORDINATOR} USING (true) WITH CHECK (true)")
            op.execute(f"CREATE POLICY worker_select ON {table} FOR SELECT TO {WORKER} USING (true)")
            op.execute(f"CREATE POLICY worker_insert ON {table} FOR INSERT TO {WORKER} WITH CHECK ({HOLDS})")
    op.execute("ANALYZE jobs, results, result_summaries, result_identities" if dialect == "postgresql" else "ANALYZE")


def downgrade() -> None:
    op.drop_index("ix_jobs_model_engine_created_at", table_name="jobs")
    op.drop_index("ix_jobs_duration_key", table_name="jobs")
    op.drop_index("ix_results_engine_version", table_name="results")
    op.drop_index("ix_results_created_at", table_name="results")
    op.drop_index("ix_results_status_identity_hash_created_at", table_name="results")
    with op.batch_alter_table("results") as batch:
        batch.drop_column("engine_version")
    op.drop_table("result_identities")
    op.drop_index("ix_result_summaries_identity", table_name="result_summaries")
    op.drop_table("result_summaries")
