"""result_summaries: each result's per-metric aggregate (n, mean, median, var, min, max over its measured
samples), written with the result and backfilled here for results stored before; result_identities (each
identity's first ok result: the Compare page's series are found among identities); results.engine_version
(the engine package's version, read once from the environment JSON); indexes for the dashboard's filters

The backfill is frozen here, with its SQL and its arithmetic as they were at 0007 (the definitions of
siliconbench.contract.aggregate.summarize then: n, fmean, median, sample variance, min, max over the measured samples;
peak_memory_bytes and load_s from the results row), so a later change to the live table or metric list cannot
break the upgrade of an older database. Workers may insert summaries of jobs they hold, as samples.

Revision ID: 0007
Revises: 0006
"""

import statistics
from collections import defaultdict
from itertools import groupby
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: Union[str, Sequence[str], None] = "0006"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

WORKER, COORDINATOR = "siliconbench_worker", "siliconbench_coordinator"
HOLDS = "EXISTS (SELECT 1 FROM jobs j WHERE j.id = job_id AND j.worker = siliconbench_worker_host())"  # as 0006
PACKAGES = {"llama.cpp": "llama-cpp-python", "mlx": "mlx-lm"}  # = siliconbench.contract.results.ENGINE_PACKAGE today


def _engine_version_sql(dialect: str) -> str:
    def pkg(name: str) -> str:
        if dialect == "postgresql":
            return f"(environment::json -> 'packages' ->> '{name}')"
        return f"json_extract(environment, '$.packages.\"{name}\"')"

    whens = " ".join(f"WHEN '{e}' THEN {pkg(p)}" for e, p in PACKAGES.items())
    return (
        f"UPDATE results SET engine_version = (SELECT CASE jobs.engine {whens} END FROM jobs "
        f"WHERE jobs.id = results.job_id) WHERE environment IS NOT NULL"
    )


RESULT_METRICS = ("peak_memory_bytes", "load_s")  # one value per result, on the results row, at 0007
BATCH = 5_000
SELECT_SQL = sa.text(
    "SELECT r.job_id, r.identity_hash, r.status, r.throttled, r.peak_memory_bytes, r.load_s, s.metric, s.value "
    "FROM results r LEFT JOIN samples s ON s.job_id = r.job_id AND s.warmup = :f "
    "WHERE NOT EXISTS (SELECT 1 FROM result_summaries x WHERE x.job_id = r.job_id) ORDER BY r.job_id, s.id"
)
INSERT_SQL = sa.text(
    "INSERT INTO result_summaries (job_id, metric, identity_hash, status, throttled, n, mean, median, var, min, max) "
    "VALUES (:job_id, :metric, :identity_hash, :status, :throttled, :n, :mean, :median, :var, :min, :max)"
)
IDENTITIES_SQL = sa.text(
    "INSERT INTO result_identities (identity_hash, job_id) SELECT r.identity_hash, min(r.job_id) FROM results r "
    "WHERE r.status = 'ok' AND NOT EXISTS (SELECT 1 FROM result_identities i WHERE i.identity_hash = r.identity_hash) "
    "GROUP BY r.identity_hash"
)


def _summary(values: list[float]) -> dict:
    values = [float(v) for v in values]
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return dict(
        n=len(values),
        mean=statistics.fmean(values),
        median=statistics.median(values),
        var=sd**2,
        min=min(values),
        max=max(values),
    )


def backfill(conn) -> int:
    """Summaries of every result that has none, and each identity's first ok result, streamed in job order."""
    if conn.dialect.name == "postgresql":  # plan the cursor for all its rows (a sort), not for the first ones
        conn.execute(sa.text("SET LOCAL cursor_tuple_fraction = 1.0"))
    rows = conn.execute(SELECT_SQL, {"f": False}, execution_options={"stream_results": True, "yield_per": 20_000})
    batch, written = [], 0
    for job_id, group in groupby(rows, key=lambda r: r.job_id):
        group = list(group)
        first = group[0]
        measured: dict[str, list[float]] = defaultdict(list)
        for r in group:
            if r.metric is not None:
                measured[r.metric].append(r.value)
        for metric in RESULT_METRICS:
            if getattr(first, metric) is not None:
                measured[metric] = [float(getattr(first, metric))]
        common = dict(job_id=job_id, identity_hash=first.identity_hash, status=first.status, throttled=first.throttled)
        batch += [{**common, "metric": m, **_summary(v)} for m, v in measured.items()]
        if len(batch) >= BATCH:
            conn.execute(INSERT_SQL, batch)
            written, batch = written + len(batch), []
    if batch:
        conn.execute(INSERT_SQL, batch)
        written += len(batch)
    conn.execute(IDENTITIES_SQL)
    return written


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
        sa.ForeignKeyConstraint(
            ["job_id"], ["results.job_id"], name=op.f("fk_result_summaries_job_id_results"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "metric", name=op.f("pk_result_summaries")),
    )
    op.create_table(
        "result_identities",
        sa.Column("identity_hash", sa.String(), nullable=False),
        sa.Column("job_id", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["results.job_id"], name=op.f("fk_result_identities_job_id_results"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("identity_hash", name=op.f("pk_result_identities")),
    )
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("engine_version", sa.String(), nullable=True))
    op.execute(_engine_version_sql(dialect))
    op.create_index(
        "ix_results_status_identity_hash_created_at",
        "results",
        ["status", "identity_hash", "created_at"],
        postgresql_include=["throttled"],
    )
    op.create_index("ix_results_created_at", "results", ["created_at"])
    op.create_index("ix_results_engine_version", "results", ["engine_version"])
    op.create_index(
        "ix_jobs_duration_key", "jobs", ["model", "engine", "quant", "n_prompt", "n_gen", "n_depth", "created_at"]
    )
    op.create_index("ix_jobs_model_engine_created_at", "jobs", ["model", "engine", "created_at"])
    backfill(op.get_bind())
    # After the backfill: one sorted build, not 1.7M inserts into a growing index.
    op.create_index(
        "ix_result_summaries_identity",
        "result_summaries",
        ["identity_hash", "metric", "status"],
        postgresql_include=["throttled", "n", "mean", "median", "var", "min", "max"],
    )
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
