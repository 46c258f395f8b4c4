"""Tables of the coordinator's database, portable between SQLite and PostgreSQL.

Only migrations (``siliconbench/migrations/versions``) create these tables; this module is their description for
queries and for ``alembic revision --autogenerate``. Statuses are plain strings guarded by CHECK
constraints (no database enum types, which migrations handle badly). Every datetime is stored in UTC
and read back timezone-aware, on SQLite too.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    false,
    func,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

SWEEP_STATUSES = ("queued", "running", "done", "cancelled")
JOB_STATUSES = ("queued", "running", "ok", "failed", "cancelled")  # = siliconbench.contract.results.JobStatus
RESULT_STATUSES = ("ok", "failed", "cancelled")  # final statuses only

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class UTCDateTime(TypeDecorator):
    """DateTime(timezone=True) that always returns aware UTC datetimes (SQLite keeps no offset).

    A naive datetime handed in is taken to be UTC already.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# BIGINT primary keys do not autoincrement on SQLite: only "INTEGER PRIMARY KEY" is the rowid alias.
BigIntPK = BigInteger().with_variant(Integer, "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def _created() -> Mapped[datetime]:
    return mapped_column(UTCDateTime, default=utcnow, server_default=func.current_timestamp())


class Sweep(Base):
    __tablename__ = "sweeps"
    __table_args__ = (CheckConstraint(_in("status", SWEEP_STATUSES), name="status"),)

    id: Mapped[str] = mapped_column(String, primary_key=True)
    name: Mapped[str] = mapped_column(String)
    spec: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = _created()
    status: Mapped[str] = mapped_column(String, default="queued", server_default="queued")
    n_jobs: Mapped[int] = mapped_column(Integer)
    # The process running an embedded sweep ("embedded HOST pid PID at CREATE_TIME"); None for the fleet's (0005).
    owner: Mapped[str | None] = mapped_column(String)


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint(_in("status", JOB_STATUSES), name="status"),
        Index("ix_jobs_sweep_id_idx", "sweep_id", "idx", unique=True),
        # Claims and results update every index of jobs (none of their updates is HOT): keep them few (0009).
        Index("ix_jobs_status_lease", "status", "lease_expires_at"),
        # The duration estimate: the newest jobs of one configuration, read backwards from the index (0007).
        Index("ix_jobs_duration_key", "model", "engine", "quant", "n_prompt", "n_gen", "n_depth", "created_at"),
        Index("ix_jobs_model_engine_created_at", "model", "engine", "created_at"),
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    sweep_id: Mapped[str] = mapped_column(ForeignKey("sweeps.id", ondelete="CASCADE"))
    idx: Mapped[int] = mapped_column(Integer)
    spec: Mapped[dict] = mapped_column(JSON)
    model: Mapped[str] = mapped_column(String)
    engine: Mapped[str] = mapped_column(String)
    quant: Mapped[str] = mapped_column(String)
    quant_level: Mapped[str] = mapped_column(String)
    workload: Mapped[str] = mapped_column(String)
    n_prompt: Mapped[int] = mapped_column(Integer)
    n_gen: Mapped[int] = mapped_column(Integer)
    n_depth: Mapped[int] = mapped_column(Integer)
    repetitions: Mapped[int] = mapped_column(Integer)
    model_sha256: Mapped[str] = mapped_column(String)
    status: Mapped[str] = mapped_column(String, default="queued", server_default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    host: Mapped[str | None] = mapped_column(String)
    worker: Mapped[str | None] = mapped_column(String)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = _created()
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    error: Mapped[str | None] = mapped_column(Text)
    # The fleet (0002): the worker a job must run on (placement: each), the queue it was sent to, and when.
    target_host: Mapped[str | None] = mapped_column(String)
    queue: Mapped[str | None] = mapped_column(String)
    enqueued_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Claims of ``attempts`` that ended with the worker gone (lease expired), not by the job itself (0005).
    interruptions: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class JobAttempt(Base):
    """An attempt that did not produce the job's result: how it ended (a crash retried, the worker gone).
    The attempt that did is the result itself; a job that ran once cleanly has no rows here."""

    __tablename__ = "job_attempts"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    attempt: Mapped[int] = mapped_column(Integer, primary_key=True)  # the claim's number (jobs.attempts)
    worker: Mapped[str | None] = mapped_column(String)
    host: Mapped[str | None] = mapped_column(String)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime] = mapped_column(UTCDateTime)
    cause: Mapped[str] = mapped_column(Text)  # "crash: ..." (counts) or "interrupted: ..." (does not)


class Result(Base):
    """Exactly one per job: the primary key is the job id, so a second write of a result is a no-op."""

    __tablename__ = "results"
    __table_args__ = (
        CheckConstraint(_in("status", RESULT_STATUSES), name="status"),
        Index("ix_results_identity_hash", "identity_hash"),
        # The Compare page's first pass: newest identities among ok results, read from the index alone (0007).
        Index(
            "ix_results_status_identity_hash_created_at",
            "status",
            "identity_hash",
            "created_at",
            postgresql_include=["disturbed"],
        ),
        Index("ix_results_created_at", "created_at"),  # the Result page's picker, newest first
        Index("ix_results_engine_version", "engine_version"),
    )

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    status: Mapped[str] = mapped_column(String)
    error: Mapped[str | None] = mapped_column(Text)
    stderr_tail: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime)
    wall_s: Mapped[float | None] = mapped_column(Float)
    load_s: Mapped[float | None] = mapped_column(Float)
    peak_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    baseline_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    peak_footprint_bytes: Mapped[int | None] = mapped_column(BigInteger)  # Darwin's phys_footprint
    baseline_footprint_bytes: Mapped[int | None] = mapped_column(BigInteger)
    disturbed: Mapped[bool | None] = mapped_column(
        Boolean
    )  # throttled or contended (JobResult.disturbed); None: not recorded
    hostname: Mapped[str | None] = mapped_column(String)
    chip: Mapped[str | None] = mapped_column(String)
    identity_hash: Mapped[str] = mapped_column(String)
    environment: Mapped[dict | None] = mapped_column(JSON(none_as_null=True))
    extra: Mapped[dict] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = _created()
    # The engine package's version from the environment, kept as a column so filters need not parse JSON (0007).
    engine_version: Mapped[str | None] = mapped_column(String)


class SampleRow(Base):
    """Raw samples in long format: one row per (job, repetition, metric). Kept lean for SQL aggregation."""

    __tablename__ = "samples"
    __table_args__ = (Index("ix_samples_job_id_metric", "job_id", "metric"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("results.job_id", ondelete="CASCADE"))
    repetition: Mapped[int] = mapped_column(Integer)
    warmup: Mapped[bool] = mapped_column(Boolean)
    metric: Mapped[str] = mapped_column(String)
    value: Mapped[float] = mapped_column(Float)


class ResultSummary(Base):
    """One result's aggregate of one metric over its measured samples (warmups excluded), written with the
    result by ``siliconbench.contract.aggregate.summarize`` (0007). The raw samples stay the source of truth.
    The results row's one-value metrics (siliconbench.storage.summaries.RESULT_METRICS) are summaries of one value."""

    __tablename__ = "result_summaries"
    __table_args__ = (
        # A series' summaries side by side in one index, read without the table (PostgreSQL's INCLUDE).
        Index(
            "ix_result_summaries_identity",
            "identity_hash",
            "metric",
            "status",
            postgresql_include=["disturbed", "n", "mean", "median", "var", "min", "max"],
        ),
    )

    job_id: Mapped[str] = mapped_column(ForeignKey("results.job_id", ondelete="CASCADE"), primary_key=True)
    metric: Mapped[str] = mapped_column(String, primary_key=True)
    # Copies of the result's (never updated): a series reads its summaries without joining each result.
    identity_hash: Mapped[str] = mapped_column(String)
    status: Mapped[str] = mapped_column(String)
    disturbed: Mapped[bool | None] = mapped_column(Boolean)
    n: Mapped[int] = mapped_column(Integer)
    mean: Mapped[float] = mapped_column(Float)
    median: Mapped[float] = mapped_column(Float)
    var: Mapped[float] = mapped_column(Float)  # sample variance (n - 1), 0 for one sample: summarize's stddev squared
    min: Mapped[float] = mapped_column(Float)
    max: Mapped[float] = mapped_column(Float)


class ResultIdentity(Base):
    """Each identity with an ok result, and its first ok result (0007): the Compare page finds the series
    matching its filters among identities, not among every result; every filter but the sweep is a fact
    of the identity, so its first result answers for all of them."""

    __tablename__ = "result_identities"

    identity_hash: Mapped[str] = mapped_column(String, primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("results.job_id", ondelete="CASCADE"))


class Host(Base):
    __tablename__ = "hosts"

    name: Mapped[str] = mapped_column(String, primary_key=True)
    hostname: Mapped[str | None] = mapped_column(String)
    chip: Mapped[str | None] = mapped_column(String)
    memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    os: Mapped[str | None] = mapped_column(String)
    info: Mapped[dict] = mapped_column(JSON, default=dict)
    engines: Mapped[list] = mapped_column(JSON, default=list)
    models: Mapped[list] = mapped_column(JSON, default=list)
    online: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    last_heartbeat: Mapped[datetime | None] = mapped_column(UTCDateTime)
    current_job_id: Mapped[str | None] = mapped_column(String)
    # what the host does besides a job (0010): {"kind": "fetch", "model", "quant", "done", "total", "since"}
    activity: Mapped[dict | None] = mapped_column(JSON)
    registered_at: Mapped[datetime] = _created()


class FleetModel(Base):
    """A model the coordinator knows by itself (0013): published by an operator with fetchable forms, fetched by every
    worker before its first job of it (siliconbench.storage.fleet_models, siliconbench.coordinator.fleet.sweeps.fleet_catalog)."""

    __tablename__ = "fleet_models"

    name: Mapped[str] = mapped_column(String, primary_key=True)
    manifest: Mapped[dict] = mapped_column(JSON)
    published_by: Mapped[str | None] = mapped_column(String)
    published_at: Mapped[datetime] = _created()


class UserFile(Base):
    """A user's file stored once by digest (0016): a serve workload's prompt dataset too large to travel in each job
    (siliconbench.storage.user_files); its bytes in UserFileChunk rows."""

    __tablename__ = "user_files"

    digest: Mapped[str] = mapped_column(String, primary_key=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    chunks: Mapped[int] = mapped_column(Integer)
    stored_at: Mapped[datetime] = _created()


class UserFileChunk(Base):
    __tablename__ = "user_file_chunks"

    digest: Mapped[str] = mapped_column(ForeignKey("user_files.digest", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class WorkerLogin(Base):
    """A worker's database login and the one host it may act as (0006; row-level security reads it, siliconbench.storage.roles)."""

    __tablename__ = "worker_logins"

    login: Mapped[str] = mapped_column(String, primary_key=True)
    host: Mapped[str] = mapped_column(String)
    created_at: Mapped[datetime] = _created()


FINDING_STATUSES = ("open", "confirming", "confirmed", "not_confirmed", "inconclusive", "dismissed")
FINDING_VERDICTS = ("regression", "improvement")


class Finding(Base):
    """A step in a series' history (siliconbench.coordinator.history.regressions), and the confirmation sweep attached to it (0004)."""

    __tablename__ = "findings"
    __table_args__ = (
        CheckConstraint(_in("status", FINDING_STATUSES), name="status"),
        CheckConstraint(_in("verdict", FINDING_VERDICTS), name="verdict"),
        Index("ix_findings_key", "key", unique=True),
        Index("ix_findings_series_id_metric", "series_id", "metric"),
        Index("ix_findings_status", "status"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String)
    series_id: Mapped[str] = mapped_column(String)
    series: Mapped[str] = mapped_column(String)
    series_key: Mapped[dict] = mapped_column(JSON)
    metric: Mapped[str] = mapped_column(String)
    verdict: Mapped[str] = mapped_column(String)
    host: Mapped[str | None] = mapped_column(String)
    engine: Mapped[str] = mapped_column(String)
    model: Mapped[str] = mapped_column(String)
    before_job_id: Mapped[str] = mapped_column(String)
    after_job_id: Mapped[str] = mapped_column(String)
    before: Mapped[dict] = mapped_column(JSON)
    after: Mapped[dict] = mapped_column(JSON)
    changes: Mapped[dict] = mapped_column(JSON)
    ratio: Mapped[float | None] = mapped_column(Float)
    p_value: Mapped[float | None] = mapped_column(Float)
    comparison: Mapped[dict] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String, default="open", server_default="open")
    confirm_sweep_id: Mapped[str | None] = mapped_column(ForeignKey("sweeps.id", ondelete="SET NULL"))
    confirm_result: Mapped[dict | None] = mapped_column(JSON(none_as_null=True))
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
