"""Results and their samples: written once per job id, read back as stored results. Plain functions on the
caller's Session (its transaction), and the one-statement write the worker's held connection runs
(``SAVE_SQL``, siliconbench.storage.hot_path).

``save_result`` is idempotent by job id, also between concurrent writers: the result row is inserted
with INSERT ... ON CONFLICT DO NOTHING, and the samples and the job's final status are written only by
the writer whose insert took. A redelivered job, a replayed spool file or two workers racing on one
job therefore store one result.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from siliconbench.contract.errors import SiliconbenchError
from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.results import Environment, JobResult, JobStatus, Sample, contract_problems

from siliconbench.storage.summaries import COLUMNS as _SUMMARY_COLUMNS, FROM_RESULT, summary_rows
from siliconbench.storage.tables import RESULT_STATUSES, Job, Result, ResultIdentity, ResultSummary, SampleRow, utcnow

CHUNK = 500  # ids per IN (...) list


class UnknownJob(SiliconbenchError):
    """A result for a job the database does not hold (its sweep was never created, or was deleted)."""


@dataclass(frozen=True)
class StoredResult:
    job: JobSpec
    result: JobResult
    host: str | None
    worker: str | None
    created_at: datetime  # when the result row was written


def _insert_ignoring_duplicate(session: Session, values: dict) -> bool:
    """True if this call inserted the result row, False if one was there (or a racing writer's won)."""
    dialect = session.get_bind().dialect.name
    make = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}.get(dialect)
    if make is None:
        raise NotImplementedError(f"save_result supports SQLite and PostgreSQL, not {dialect}")
    stmt = make(Result.__table__).values(**values).on_conflict_do_nothing(index_elements=["job_id"])
    # RETURNING, not rowcount: rowcount of an INSERT is -1 on psycopg unless asked for.
    return session.execute(stmt.returning(Result.job_id)).scalar() is not None


def _result_writes(job: JobSpec, result: JobResult, host: str | None, worker: str | None):
    """What storing ``result`` writes: the results row's values, its sample rows, their summaries, and the
    job's changes (its final status, who ran it)."""
    if result.job_id != job.job_id:
        raise ValueError(f"result of job {result.job_id!r} handed in with job {job.job_id!r}")
    problems = contract_problems(result, job.workload)
    if problems:
        raise ValueError(f"result of job {job.job_id!r} is outside the contract: {'; '.join(problems)}")
    status = JobStatus(result.status).value
    if status not in RESULT_STATUSES:
        raise ValueError(f"a stored result must be final ({', '.join(RESULT_STATUSES)}), not {status!r}")
    env = result.environment
    values = dict(
        job_id=job.job_id,
        status=status,
        error=result.error,
        stderr_tail=result.stderr_tail,
        started_at=result.started_at,
        finished_at=result.finished_at,
        wall_s=result.wall_s,
        load_s=result.load_s,
        peak_memory_bytes=result.peak_memory_bytes,
        baseline_memory_bytes=result.baseline_memory_bytes,
        peak_footprint_bytes=result.peak_footprint_bytes,
        baseline_footprint_bytes=result.baseline_footprint_bytes,
        disturbed=result.disturbed,
        hostname=env.hostname if env else None,
        chip=env.chip if env else None,
        identity_hash=result.identity_hash(job),
        environment=env.model_dump(mode="json") if env else None,
        extra=result.extra,
        created_at=utcnow(),
        engine_version=env.engine_version(job.engine) if env else None,
    )
    rows = [
        dict(repetition=s.repetition, warmup=s.warmup, metric=m, value=float(v))
        for s in result.samples
        for m, v in s.values.items()
        if v is not None and math.isfinite(v)
    ]
    summaries = summary_rows(rows, values)  # of exactly the stored samples, and the row's one-value metrics
    changes = dict(status=status, finished_at=result.finished_at, error=result.error, lease_expires_at=None)
    if result.started_at is not None:
        changes["started_at"] = result.started_at
    if host is not None:
        changes["host"] = host
    if worker is not None:
        changes["worker"] = worker
    return values, rows, summaries, changes


def save_result(
    session: Session, job: JobSpec, result: JobResult, host: str | None = None, worker: str | None = None
) -> bool:
    """Write the result, its samples and the job's final status; False (nothing written) if already stored.

    Non-finite sample values (NaN, inf) are not stored: SQLite cannot hold NaN in a NOT NULL column.
    Raises UnknownJob if the job is not in the database; the transaction must then be rolled back.
    """
    if session.get_bind().dialect.name == "postgresql":  # one statement, the text the worker's hot path runs
        return save_result_with(session_executor(session), job, result, host=host, worker=worker)
    values, rows, summaries, changes = _result_writes(job, result, host, worker)
    try:
        inserted = _insert_ignoring_duplicate(session, values)
    except IntegrityError as exc:
        raise _unknown(job, exc) from None
    if not inserted:
        return False
    if rows:
        session.execute(insert(SampleRow.__table__), [dict(job_id=job.job_id, **r) for r in rows])  # one executemany
    if summaries:
        common = {k: values[k] for k in FROM_RESULT}
        session.execute(insert(ResultSummary.__table__), [common | r for r in summaries])
    if values["status"] == "ok":
        session.execute(
            sqlite.insert(ResultIdentity.__table__)
            .values(identity_hash=values["identity_hash"], job_id=job.job_id)
            .on_conflict_do_nothing()
        )
    session.execute(update(Job.__table__).where(Job.id == job.job_id).values(**changes))
    return True


# PostgreSQL: the result row, its samples, their summaries, the identity and the job's final status in one
# statement of one fixed shape, so it is parsed and planned once per connection (psycopg prepares a query
# it has run 5 times; the worker's held connection asks for it at once) whatever the number of samples:
# they travel as arrays, unnested in their order (sample ids keep the order the result lists them in,
# load_stored sorts by id). The samples, summaries, identity and status are written only if this
# statement's insert took (a duplicate or the loser of a race gets no row from ``ins``); a statement is
# atomic, so all commit together or not at all. Job columns a result leaves unknown (started_at, host,
# worker: None) keep their value, as on SQLite.
_RESULT_COLUMNS = (
    "job_id",
    "status",
    "error",
    "stderr_tail",
    "started_at",
    "finished_at",
    "wall_s",
    "load_s",
    "peak_memory_bytes",
    "baseline_memory_bytes",
    "peak_footprint_bytes",
    "baseline_footprint_bytes",
    "disturbed",
    "hostname",
    "chip",
    "identity_hash",
    "environment",
    "extra",
    "created_at",
    "engine_version",
)


_JSON_COLUMNS = ("environment", "extra")


_CASTS = {
    "environment": "::json",
    "extra": "::json",
    "started_at": "::timestamptz",
    "finished_at": "::timestamptz",
    "created_at": "::timestamptz",
    "disturbed": "::boolean",
    "wall_s": "::float8",
    "load_s": "::float8",
    **{
        k: "::bigint"
        for k in ("peak_memory_bytes", "baseline_memory_bytes", "peak_footprint_bytes", "baseline_footprint_bytes")
    },
}


assert set(_RESULT_COLUMNS) == {c.name for c in Result.__table__.c}, "save_result's SQL lists every results column"


SAVE_SQL = f"""WITH ins AS (
  INSERT INTO results ({", ".join(_RESULT_COLUMNS)})
  VALUES ({", ".join(f"%(r_{c})s{_CASTS.get(c, '::text')}" for c in _RESULT_COLUMNS)})
  ON CONFLICT (job_id) DO NOTHING
  RETURNING job_id, identity_hash, status, disturbed
), upd AS (
  UPDATE jobs SET status = ins.status, finished_at = %(r_finished_at)s::timestamptz, error = %(r_error)s::text,
    lease_expires_at = NULL, started_at = COALESCE(%(j_started_at)s::timestamptz, jobs.started_at),
    host = COALESCE(%(j_host)s::text, jobs.host), worker = COALESCE(%(j_worker)s::text, jobs.worker)
  FROM ins WHERE jobs.id = ins.job_id
), idn AS (
  INSERT INTO result_identities (identity_hash, job_id)
  SELECT identity_hash, job_id FROM ins WHERE status = 'ok'
  ON CONFLICT (identity_hash) DO NOTHING
), smp AS (
  INSERT INTO samples (job_id, repetition, warmup, metric, value)
  SELECT ins.job_id, v.repetition, v.warmup, v.metric, v.value
  FROM ins, unnest(%(s_repetition)s::integer[], %(s_warmup)s::boolean[], %(s_metric)s::text[],
                   %(s_value)s::float8[]) WITH ORDINALITY AS v (repetition, warmup, metric, value, ord)
  ORDER BY v.ord
), sry AS (
  INSERT INTO result_summaries (job_id, identity_hash, status, disturbed, metric, n, mean, median, var, min, max)
  SELECT ins.job_id, ins.identity_hash, ins.status, ins.disturbed, m.metric, m.n, m.mean, m.median, m.var, m.min, m.max
  FROM ins, unnest(%(m_metric)s::text[], %(m_n)s::integer[], %(m_mean)s::float8[], %(m_median)s::float8[],
                   %(m_var)s::float8[], %(m_min)s::float8[], %(m_max)s::float8[]) AS m (metric, n, mean, median, var, min, max)
)
SELECT job_id FROM ins"""


# The same statement committing without waiting for its WAL flush (set_config(..., true): this transaction only),
# for the result of a job cheaper to rerun than the flush (SILICONBENCH_DURABLE_AFTER_S; why nothing is lost or
# doubled: jobstate.try_claim, whose claim commits the same way).
SAVE_SQL_ASYNC = (
    SAVE_SQL.removesuffix("SELECT job_id FROM ins")
    + "SELECT job_id, set_config('synchronous_commit', 'off', true) FROM ins"
)


def session_executor(session: Session):
    """execute(sql, params) -> first row, on the session's connection (in its transaction)."""
    return lambda sql, params: session.connection().exec_driver_sql(sql, params).first()


def save_result_with(
    execute, job: JobSpec, result: JobResult, host: str | None = None, worker: str | None = None, durable: bool = True
) -> bool:
    """PostgreSQL's save_result through ``execute(sql, params) -> first row or None``: a Session's connection
    (session_executor), or the worker's held connection (autocommitted, prepared: siliconbench.storage.hot_path).
    ``durable=False`` (autocommit only): the commit does not wait for its WAL flush (SAVE_SQL_ASYNC).
    SQLAlchemy's exceptions, as from a Session; UnknownJob if the job is not in the database."""
    try:
        return execute(SAVE_SQL if durable else SAVE_SQL_ASYNC, save_params(job, result, host, worker)) is not None
    except IntegrityError as exc:
        raise _unknown(job, exc) from None


def _unknown(job: JobSpec, exc: IntegrityError) -> UnknownJob:
    return UnknownJob(f"job {job.job_id} ({job.label()}) of sweep {job.sweep_id!r} is not in the database: {exc.orig}")


def _aware(t: datetime | None) -> datetime | None:
    """As tables.UTCDateTime binds it: a naive datetime is UTC already."""
    return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t


def save_params(job: JobSpec, result: JobResult, host: str | None = None, worker: str | None = None) -> dict:
    """SAVE_SQL's parameters (pyformat, for psycopg): what save_result writes for ``result``."""
    values, rows, summaries, changes = _result_writes(job, result, host, worker)
    p = {f"r_{c}": values[c] for c in _RESULT_COLUMNS}
    for c in ("started_at", "finished_at", "created_at"):
        p[f"r_{c}"] = _aware(p[f"r_{c}"])
    for c in _JSON_COLUMNS:  # as SQLAlchemy's JSON type writes it (json.dumps); None: SQL NULL
        p[f"r_{c}"] = None if p[f"r_{c}"] is None else json.dumps(p[f"r_{c}"])
    p.update(j_started_at=_aware(changes.get("started_at")), j_host=changes.get("host"), j_worker=changes.get("worker"))
    for k in ("repetition", "warmup", "metric", "value"):
        p[f"s_{k}"] = [r[k] for r in rows]
    for k in _SUMMARY_COLUMNS:
        p[f"m_{k}"] = [r[k] for r in summaries]
    return p


def _chunks(ids: list[str]):
    for i in range(0, len(ids), CHUNK):
        yield ids[i : i + CHUNK]


def load_stored(session: Session, sweep_id: str | None = None, job_ids=None) -> list[StoredResult]:
    """Stored results (of one sweep, of some jobs, or all) in run order, with who ran them and when."""
    base = select(Job.spec, Job.host, Job.worker, Result.__table__).join(Result, Result.job_id == Job.id)
    samples_q = select(SampleRow.job_id, SampleRow.repetition, SampleRow.warmup, SampleRow.metric, SampleRow.value)
    if sweep_id is not None:
        base = base.where(Job.sweep_id == sweep_id)
        samples_q = samples_q.join(Job, Job.id == SampleRow.job_id).where(Job.sweep_id == sweep_id)
    if job_ids is None:
        batches = [(base, samples_q)]
    else:
        ids = list(dict.fromkeys(job_ids))
        batches = [(base.where(Job.id.in_(c)), samples_q.where(SampleRow.job_id.in_(c))) for c in _chunks(ids)]
    rows, reps = [], defaultdict(dict)  # job id -> (repetition, warmup) -> {metric: value}
    for q, sq in batches:
        rows += session.execute(q.order_by(Job.sweep_id, Job.idx)).mappings().all()
        for jid, rep, warm, metric, value in session.execute(sq.order_by(SampleRow.id)):
            reps[jid].setdefault((rep, bool(warm)), {})[metric] = value
    rows.sort(key=lambda r: (r["spec"]["sweep_id"], r["spec"]["index"]))
    out = []
    for r in rows:
        samples = [Sample(repetition=rep, warmup=warm, values=v) for (rep, warm), v in reps[r["job_id"]].items()]
        result = JobResult(
            job_id=r["job_id"],
            status=JobStatus(r["status"]),
            error=r["error"],
            stderr_tail=r["stderr_tail"],
            started_at=r["started_at"],
            finished_at=r["finished_at"],
            wall_s=r["wall_s"],
            load_s=r["load_s"],
            peak_memory_bytes=r["peak_memory_bytes"],
            baseline_memory_bytes=r["baseline_memory_bytes"],
            peak_footprint_bytes=r["peak_footprint_bytes"],
            baseline_footprint_bytes=r["baseline_footprint_bytes"],
            samples=samples,
            environment=Environment.model_validate(r["environment"]) if r["environment"] else None,
            extra=r["extra"] or {},
        )
        out.append(StoredResult(JobSpec.model_validate(r["spec"]), result, r["host"], r["worker"], r["created_at"]))
    return out


def load_results(session: Session, sweep_id: str | None = None, job_ids=None) -> list[tuple[JobSpec, JobResult]]:
    """(job, result) pairs rebuilt from the rows, samples reassembled, in run order."""
    return [(s.job, s.result) for s in load_stored(session, sweep_id, job_ids)]
