"""The read queries behind the dashboard's pages, one function per thing a page shows.

The filters are ``siliconbench.coordinator.reads.filters``'s; the series and their pooled statistics (read from the
per-result summaries) are ``siliconbench.coordinator.reads.compare_series``'s; the Sweeps page's duration estimate is
``siliconbench.coordinator.reads.estimates``'s. All are re-exported here, the dashboard's one entry point. Raw samples are
read only for one result's detail and for the distribution plot (``raw_samples``, capped).
"""

from __future__ import annotations

from sqlalchemy import String, cast, false, func, literal, select, union_all
from sqlalchemy.orm import Session

from siliconbench.coordinator.reads.compare_series import series  # noqa: F401
from siliconbench.coordinator.reads.estimates import estimate_duration  # noqa: F401 (re-exported: the dashboard's one entry point)
from siliconbench.coordinator.reads.filters import (  # noqa: F401
    COLUMNS,
    MAX_RAW_SAMPLES,
    MAX_SERIES,
    SAMPLE_METRICS,
    Filters,
    conditions,
    engine_version,
    host_detail,
    left_out_note,
    ok_results,
)
from siliconbench.coordinator.reports.export import load_records
from siliconbench.storage.result_store import load_stored
from siliconbench.storage.tables import Job, JobAttempt, Result, ResultIdentity, SampleRow, Sweep

__all__ = [
    "Filters",
    "MAX_RAW_SAMPLES",
    "MAX_SERIES",
    "SAMPLE_METRICS",
    "active_sweeps",
    "attempts",
    "data_version",
    "disturbed_results",
    "left_out_note",
    "estimate_duration",
    "failed_results",
    "filter_options",
    "raw_samples",
    "recent_results",
    "result_detail",
    "series",
]


def data_version(session: Session) -> tuple:
    """Changes whenever a result is stored: the pages' cache key, so new results show at once."""
    return tuple(session.execute(select(func.count(), func.max(Result.created_at))).one())


def filter_options(session: Session) -> dict[str, list]:
    """The distinct values each filter can take over the stored results, sweeps newest first.

    Everything but the sweep is part of a result's identity, so one representative result per identity
    with an ok result is enough (result_identities: a few thousand rows, however long the history): the
    environment JSON (Mac model, GPU cores) is parsed once per identity, and each column's distinct values
    come back as a few rows (one query, UNION ALL over a CTE).
    """
    rep = select(ResultIdentity.job_id).subquery("rep")
    cols = {k: v for k, v in COLUMNS.items() if k != "sweeps"} | {
        "quants": Job.quant_level,
        "quant_exact": Job.quant,
        "engine_versions": engine_version(),
        "mac_models": host_detail("model"),
        "gpu_cores": host_detail("gpu_cores", as_int=True),
    }
    ids = (
        select(*(c.label(k) for k, c in cols.items()))
        .select_from(rep)
        .join(Result, Result.job_id == rep.c.job_id)
        .join(Job, Job.id == rep.c.job_id)
    ).cte("ids")
    q = union_all(*(select(literal(k).label("f"), cast(ids.c[k], String).label("v")).distinct() for k in cols))
    out: dict[str, set] = {k: set() for k in cols}
    for f, v in session.execute(q):
        if v is not None:
            out[f].add(int(v) if f in ("n_prompt", "n_gen", "n_depth", "gpu_cores") else v)
    out["quants"] |= out.pop("quant_exact")
    opts: dict[str, list] = {k: sorted(v) for k, v in out.items()}
    # Correlated EXISTS: one index probe per sweep (ix_jobs_sweep_id_idx), not a scan of every job.
    has_results = select(Job.id).where(Job.sweep_id == Sweep.id, Job.status.in_(("ok", "failed"))).exists()
    opts["sweeps"] = list(
        session.scalars(select(Sweep.id).where(has_results).order_by(Sweep.created_at.desc(), Sweep.id.desc()))
    )
    return opts


def raw_samples(session: Session, f: Filters, metric: str, identities=None, limit: int = MAX_RAW_SAMPLES) -> list[dict]:
    """Measured samples of one metric for the distribution plot: identity_hash, job_id, repetition, value."""
    sel = ok_results(f, identities).subquery("sel")
    q = (
        select(sel.c.k.label("identity_hash"), SampleRow.job_id, SampleRow.repetition, SampleRow.value)
        .join(sel, sel.c.job_id == SampleRow.job_id)
        .where(SampleRow.metric == metric, SampleRow.warmup == false())
        .limit(limit)
    )
    return [dict(r._mapping) for r in session.execute(q)]


def disturbed_results(session: Session, f: Filters) -> dict[str, int]:
    """How many ok results matching ``f`` (its disturbed setting aside) ran disturbed, by verdict: {"disturbed",
    "throttled", "contended"} (one result can be both). What the page leaves out unless asked, said beside the control
    that shows them."""
    extra = Result.extra
    throttled = extra[("thermal", "throttled")].as_boolean()
    contended = extra[("busy", "contended")].as_boolean()
    q = (
        select(func.count(), func.count().filter(throttled.is_(True)), func.count().filter(contended.is_(True)))
        .select_from(Result)
        .join(Job, Job.id == Result.job_id)
        .where(Result.status == "ok", Result.disturbed.is_(True), *conditions(f, result_level=False))
    )
    n, heat, load = session.execute(q).one()
    return {"disturbed": n, "throttled": heat, "contended": load}


def failed_results(session: Session, f: Filters, limit: int = 50) -> list[dict]:
    """Failed results matching the filters, newest first (the Compare page lists them, never plots them)."""
    q = (
        select(
            Result.job_id,
            Job.engine,
            Job.model,
            Job.quant,
            Job.n_prompt,
            Job.n_gen,
            Job.n_depth,
            Result.hostname,
            Result.error,
            Result.created_at,
        )
        .join(Job, Job.id == Result.job_id)
        .where(Result.status != "ok", *conditions(f))
        .order_by(Result.created_at.desc())
        .limit(limit)
    )
    return [dict(r._mapping) for r in session.execute(q)]


def recent_results(session: Session, limit: int = 200, failed_only: bool = False) -> list[dict]:
    """The Result page's picker: the newest results (job id, label parts, status)."""
    q = (
        select(
            Result.job_id,
            Result.status,
            Job.sweep_id,
            Job.engine,
            Job.model,
            Job.quant,
            Job.n_prompt,
            Job.n_gen,
            Job.n_depth,
            Result.hostname,
            Result.disturbed,
            Result.created_at,
        )
        .join(Job, Job.id == Result.job_id)
        .order_by(Result.created_at.desc(), Result.job_id)
        .limit(limit)
    )
    if failed_only:
        q = q.where(Result.status != "ok")
    return [dict(r._mapping) for r in session.execute(q)]


def result_detail(session: Session, job_id: str) -> dict | None:
    """Everything about one result: the export record (summaries, warnings, environment) plus every raw
    sample of every metric and the job's engine options; None for an unknown or unfinished job."""
    stored = load_stored(session, job_ids=[job_id])
    if not stored:
        return None
    s = stored[0]
    record = load_records(session, job_ids=[job_id])[0]
    samples = [{"repetition": x.repetition, "warmup": x.warmup, **x.values} for x in s.result.samples]
    return {
        "record": record,
        "samples": samples,
        "engine_options": s.job.engine_options,
        "job": s.job.model_dump(),
        "extra": s.result.extra,
        "wall_s": s.result.wall_s,
        "worker": s.worker,
        "attempts": attempts(session, job_id, s.result),
    }


def attempts(session: Session, job_id: str, result) -> list[dict]:
    """Every attempt of the job, in order: those that ended without the result (job_attempts, with their
    cause) and the one that produced it."""
    rows = [
        {"attempt": a.attempt, "worker": a.worker, "started_at": a.started_at, "ended_at": a.ended_at, "cause": a.cause}
        for a in session.scalars(select(JobAttempt).where(JobAttempt.job_id == job_id).order_by(JobAttempt.attempt))
    ]
    job = session.get(Job, job_id)
    final = {
        "attempt": job.attempts if job else None,
        "worker": job.worker if job else None,
        "started_at": result.started_at,
        "ended_at": result.finished_at,
        "cause": "ok" if result.status == "ok" else f"failed: {result.error}",
    }
    return rows + [final]


def active_sweeps(session: Session) -> list[str]:
    """Sweeps still queued or running (the Sweeps page polls while there are any)."""
    return list(session.scalars(select(Sweep.id).where(Sweep.status.in_(("queued", "running")))))
