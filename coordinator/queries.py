"""The read queries behind the dashboard's pages; every aggregate over raw samples is computed in SQL.

The statistics are ``siliconbench.aggregate.summarize``'s, over the measured (non-warmup) samples:
count, mean, min, max, the median (the middle value, or the mean of the two middle values, as
``statistics.median``) and the sample variance with n - 1 (``statistics.stdev`` squared; 0 for a single
sample). ``tests/test_dashboard.py`` checks the SQL against ``summarize`` on both databases.

- PostgreSQL: its own aggregates, ``avg``, ``percentile_cont(0.5)`` (the median as defined above) and
  ``var_samp`` (n - 1, numerically stable), in one GROUP BY.
- SQLite (and anything else): portable window functions: ``row_number()`` picks the middle value(s),
  and the variance is two-pass, ``sum((v - mean)^2) / (n - 1)``, which stays exact for byte counts where
  the one-pass ``sum(v*v) - sum(v)^2/n`` cancels to noise.

Only the square root of the one variance per series is taken in Python (SQLite may lack ``sqrt``).
Results are grouped by ``identity_hash`` (job key + environment): samples of different identities are
never pooled; results of one identity (the same configuration measured again) are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy import Float, String, case, cast, false, func, literal, or_, select, union_all
from sqlalchemy.orm import Session

from storage.store import load_stored
from storage.tables import Job, JobAttempt, Result, SampleRow, Sweep

from .export import ENGINE_PACKAGE, load_records

SAMPLE_METRICS = ("prefill_tps", "decode_tps", "ttft_ms", "decode_bandwidth_pct")
JOB_METRICS = ("peak_memory_bytes", "load_s")  # one value per result, stored on the results row
MAX_SERIES = 100  # series per Compare view: more is unreadable as bars, and it bounds every query's work
MAX_RAW_SAMPLES = 20_000  # the distribution plot's cap; the aggregates never use it


@dataclass(frozen=True)
class Filters:
    """What the Compare page narrows results by; an empty tuple means "any"."""

    sweeps: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    chips: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    quants: tuple[str, ...] = ()  # an exact quantization (Q4_K_M) or a level (q4)
    engines: tuple[str, ...] = ()
    engine_versions: tuple[str, ...] = ()
    workloads: tuple[str, ...] = ()
    n_prompt: tuple[int, ...] = ()
    n_gen: tuple[int, ...] = ()
    n_depth: tuple[int, ...] = ()
    mac_models: tuple[str, ...] = ()  # hw.model, e.g. Mac14,12 (environment.host_details)
    gpu_cores: tuple[int, ...] = ()  # what binned Apple chips differ in
    include_throttled: bool = False  # results that began or ended with the host throttled are left out


def engine_version():
    """The engine package's version from the stored environment (llama-cpp-python / mlx-lm)."""
    whens = [(Job.engine == e, Result.environment[("packages", pkg)].as_string()) for e, pkg in ENGINE_PACKAGE.items()]
    return case(*whens, else_=None)


def host_detail(key: str, as_int: bool = False):
    """One of the platform's identity facts from the stored environment (environment.host_details)."""
    path = Result.environment[("host_details", key)]
    return path.as_integer() if as_int else path.as_string()


_COLUMNS = {"sweeps": Job.sweep_id, "hosts": Result.hostname, "chips": Result.chip, "models": Job.model,
            "engines": Job.engine, "workloads": Job.workload, "n_prompt": Job.n_prompt, "n_gen": Job.n_gen,
            "n_depth": Job.n_depth}


_JOB_FILTERS = ("sweeps", "models", "quants", "engines", "engine_versions", "workloads", "n_prompt", "n_gen",
                "n_depth")  # the filters on jobs columns; hosts and chips are on results


def _conditions(f: Filters) -> list:
    conds = [col.in_(getattr(f, name)) for name, col in _COLUMNS.items() if getattr(f, name)]
    if f.quants:
        conds.append(or_(Job.quant.in_(f.quants), Job.quant_level.in_(f.quants)))
    if f.engine_versions:
        conds.append(engine_version().in_(f.engine_versions))
    if f.mac_models:
        conds.append(host_detail("model").in_(f.mac_models))
    if f.gpu_cores:
        conds.append(host_detail("gpu_cores", as_int=True).in_(f.gpu_cores))
    if not f.include_throttled:
        conds.append(Result.throttled.is_not(True))  # unknown (None) is kept: most hosts cannot tell
    return conds


def _ok_results(f: Filters, identities=None):
    q = (select(Result.job_id, Result.identity_hash.label("k")).join(Job, Job.id == Result.job_id)
         .where(Result.status == "ok", *_conditions(f)))
    return q if identities is None else q.where(Result.identity_hash.in_(identities))


def data_version(session: Session) -> tuple:
    """Changes whenever a result is stored: the pages' cache key, so new results show at once."""
    return tuple(session.execute(select(func.count(), func.max(Result.created_at))).one())


def filter_options(session: Session) -> dict[str, list]:
    """The distinct values each filter can take over the stored results, sweeps newest first.

    Everything but the sweep is part of a result's identity, so one representative result per identity
    is enough: the environment JSON (engine version) is parsed once per identity, not once per result,
    and each column's distinct values come back as a few rows (one query, UNION ALL over a CTE).
    """
    rep = select(func.min(Result.job_id).label("job_id")).group_by(Result.identity_hash).subquery("rep")
    cols = {k: v for k, v in _COLUMNS.items() if k != "sweeps"} | {
        "quants": Job.quant_level, "quant_exact": Job.quant, "engine_versions": engine_version(),
        "mac_models": host_detail("model"), "gpu_cores": host_detail("gpu_cores", as_int=True)}
    ids = (select(*(c.label(k) for k, c in cols.items())).select_from(rep)
           .join(Result, Result.job_id == rep.c.job_id).join(Job, Job.id == rep.c.job_id)).cte("ids")
    q = union_all(*(select(literal(k).label("f"), cast(ids.c[k], String).label("v")).distinct() for k in cols))
    out: dict[str, set] = {k: set() for k in cols}
    for f, v in session.execute(q):
        if v is not None:
            out[f].add(int(v) if f in ("n_prompt", "n_gen", "n_depth", "gpu_cores") else v)
    out["quants"] |= out.pop("quant_exact")
    opts: dict[str, list] = {k: sorted(v) for k, v in out.items()}
    # Correlated EXISTS: one index probe per sweep (ix_jobs_sweep_id_idx), not a scan of every job.
    has_results = select(Job.id).where(Job.sweep_id == Sweep.id, Job.status.in_(("ok", "failed"))).exists()
    opts["sweeps"] = list(session.scalars(select(Sweep.id).where(has_results)
                                          .order_by(Sweep.created_at.desc(), Sweep.id.desc())))
    return opts


def _stats(session: Session, values):
    """count, mean, median, variance, min, max per (k, metric) of ``values`` (a subquery: k, metric, value).

    PostgreSQL: its own aggregates (var_samp is n-1 and numerically stable; percentile_cont(0.5) is the
    mean of the two middle values). Elsewhere (SQLite): window functions, two-pass variance.
    """
    k, metric, v = values.c.k, values.c.metric, values.c.value
    if session.get_bind().dialect.name == "postgresql":
        return select(k, metric, func.count(v).label("n"), func.avg(v).label("mean"),
                      func.percentile_cont(0.5).within_group(v).label("median"), func.var_samp(v).label("var"),
                      func.min(v).label("min"), func.max(v).label("max")).group_by(k, metric)
    part = [k, metric]
    w = select(k, metric, v, func.avg(v).over(partition_by=part).label("mean"),
               func.count().over(partition_by=part).label("n"),
               func.row_number().over(partition_by=part, order_by=v).label("rn")).subquery("w")
    dev = w.c.value - w.c.mean
    n = func.max(w.c.n)
    return select(w.c.k, w.c.metric, n.label("n"), func.max(w.c.mean).label("mean"),
                  func.avg(case(((2 * w.c.rn).between(w.c.n, w.c.n + 2), w.c.value))).label("median"),
                  (func.sum(dev * dev) / cast(func.nullif(n - 1, 0), Float)).label("var"),
                  func.min(w.c.value).label("min"), func.max(w.c.value).label("max")).group_by(w.c.k, w.c.metric)


def _summary(row) -> dict:
    sd = math.sqrt(max(row.var, 0.0)) if row.var is not None else 0.0
    return {"mean": row.mean, "median": row.median, "stddev": sd, "min": row.min, "max": row.max, "count": row.n}


_DESCRIPTION = (Job.engine, Job.model, Job.quant, Job.quant_level, Job.workload, Job.n_prompt, Job.n_gen, Job.n_depth,
                Result.hostname, Result.chip)
_ORDER = ("model", "quant_level", "n_prompt", "n_gen", "n_depth", "hostname", "engine", "engine_version",
          "identity_hash")


def series(session: Session, f: Filters = Filters(), limit: int = MAX_SERIES,
           metrics=SAMPLE_METRICS + JOB_METRICS) -> tuple[list[dict], int]:
    """The identities matching ``f`` (the ``limit`` most recently measured) and how many match in all.

    Each row: the description (engine, model, quant, lengths, host, chip, engine_version), n_results,
    a job_id of one of its results, and ``metrics``: {metric: {mean, median, stddev, min, max, count}}.
    """
    latest = func.max(Result.created_at)
    # Lean first pass over every matching result: which identities, and how many there are in all.
    top = select(Result.identity_hash, func.count().over().label("total"))
    if any(getattr(f, name) for name in _JOB_FILTERS):
        top = top.join(Job, Job.id == Result.job_id)
    top = (top.where(Result.status == "ok", *_conditions(f)).group_by(Result.identity_hash)
           .order_by(latest.desc(), Result.identity_hash).limit(limit))
    picked = session.execute(top).all()
    if not picked:
        return [], 0
    total, ids = picked[0].total, [p.identity_hash for p in picked]
    # Then the description of those only (the engine version parsed from their environment JSON).
    desc = (select(Result.identity_hash.label("identity_hash"), *(func.min(c).label(c.key) for c in _DESCRIPTION),
                   func.min(engine_version()).label("engine_version"), func.count().label("n_results"),
                   func.max(Result.job_id).label("job_id"), latest.label("created_at"))
            .join(Job, Job.id == Result.job_id).where(Result.status == "ok", *_conditions(f),
                                                      Result.identity_hash.in_(ids))
            .group_by(Result.identity_hash))
    rows = [dict(r._mapping) for r in session.execute(desc)]
    stats: dict[str, dict] = {}
    sample_m = [m for m in metrics if m not in JOB_METRICS]
    job_m = [m for m in metrics if m in JOB_METRICS]
    if sample_m:
        sel = _ok_results(f, ids).subquery("sel")
        vals = (select(sel.c.k, SampleRow.metric, SampleRow.value).join(sel, sel.c.job_id == SampleRow.job_id)
                .where(SampleRow.warmup == false(), SampleRow.metric.in_(sample_m))).subquery("vals")
        for row in session.execute(_stats(session, vals)):
            stats.setdefault(row.k, {})[row.metric] = _summary(row)
    if job_m:  # one value per result, straight from the results rows
        vals = union_all(*(_ok_results(f, ids).with_only_columns(
            Result.identity_hash.label("k"), literal(m).label("metric"), cast(getattr(Result, m), Float).label("value"))
            .where(getattr(Result, m).is_not(None)) for m in job_m)).subquery("vals")
        for row in session.execute(_stats(session, vals)):
            stats.setdefault(row.k, {})[row.metric] = _summary(row)
    for r in rows:
        r["metrics"] = stats.get(r["identity_hash"], {})
    rows.sort(key=lambda r: tuple("" if r[c] is None else r[c] for c in _ORDER))
    return rows, total


def raw_samples(session: Session, f: Filters, metric: str, identities=None, limit: int = MAX_RAW_SAMPLES) -> list[dict]:
    """Measured samples of one metric for the distribution plot: identity_hash, job_id, repetition, value."""
    sel = _ok_results(f, identities).subquery("sel")
    q = (select(sel.c.k.label("identity_hash"), SampleRow.job_id, SampleRow.repetition, SampleRow.value)
         .join(sel, sel.c.job_id == SampleRow.job_id)
         .where(SampleRow.metric == metric, SampleRow.warmup == false()).limit(limit))
    return [dict(r._mapping) for r in session.execute(q)]


def failed_results(session: Session, f: Filters, limit: int = 50) -> list[dict]:
    """Failed results matching the filters, newest first (the Compare page lists them, never plots them)."""
    q = (select(Result.job_id, Job.engine, Job.model, Job.quant, Job.n_prompt, Job.n_gen, Job.n_depth,
                Result.hostname, Result.error, Result.created_at).join(Job, Job.id == Result.job_id)
         .where(Result.status != "ok", *_conditions(f))
         .order_by(Result.created_at.desc()).limit(limit))
    return [dict(r._mapping) for r in session.execute(q)]


def recent_results(session: Session, limit: int = 200, failed_only: bool = False) -> list[dict]:
    """The Result page's picker: the newest results (job id, label parts, status)."""
    q = (select(Result.job_id, Result.status, Job.sweep_id, Job.engine, Job.model, Job.quant, Job.n_prompt,
                Job.n_gen, Job.n_depth, Result.hostname, Result.throttled, Result.created_at)
         .join(Job, Job.id == Result.job_id).order_by(Result.created_at.desc(), Result.job_id).limit(limit))
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
    return {"record": record, "samples": samples, "engine_options": s.job.engine_options, "job": s.job.model_dump(),
            "extra": s.result.extra, "wall_s": s.result.wall_s, "worker": s.worker,
            "attempts": attempts(session, job_id, s.result)}


def attempts(session: Session, job_id: str, result) -> list[dict]:
    """Every attempt of the job, in order: those that ended without the result (job_attempts, with their
    cause) and the one that produced it."""
    rows = [{"attempt": a.attempt, "worker": a.worker, "started_at": a.started_at, "ended_at": a.ended_at,
             "cause": a.cause} for a in session.scalars(select(JobAttempt).where(JobAttempt.job_id == job_id)
                                                         .order_by(JobAttempt.attempt))]
    job = session.get(Job, job_id)
    final = {"attempt": job.attempts if job else None, "worker": job.worker if job else None,
             "started_at": result.started_at, "ended_at": result.finished_at,
             "cause": "ok" if result.status == "ok" else f"failed: {result.error}"}
    return rows + [final]


def active_sweeps(session: Session) -> list[str]:
    """Sweeps still queued or running (the Sweeps page polls while there are any)."""
    return list(session.scalars(select(Sweep.id).where(Sweep.status.in_(("queued", "running")))))


def _durations(session: Session, keys: list[str], jobs) -> dict[tuple, float]:
    """Mean seconds per repetition of earlier ok results, by ``keys`` (job columns), for ``jobs``' values."""
    cols = [getattr(Job, k) for k in keys]
    per_rep = Result.wall_s / Job.repetitions  # warmup included in wall_s: assumes the usual 1 warmup
    if "n_prompt" not in keys:  # coarser fallback: seconds per repetition and token
        per_rep = per_rep / (Job.n_prompt + Job.n_gen + Job.n_depth)
    narrow = [c.in_(sorted({getattr(j, k) for j in jobs})) for k, c in zip(keys, cols)]  # a superset, by index
    q = (select(*cols, func.avg(per_rep)).join(Job, Job.id == Result.job_id)
         .where(Result.status == "ok", Result.wall_s.is_not(None), *narrow).group_by(*cols))
    return {tuple(r[:-1]): r[-1] for r in session.execute(q)}


EXACT = ("model", "engine", "quant", "n_prompt", "n_gen", "n_depth")


def estimate_duration(session: Session, jobs) -> dict:
    """Estimated run time of planned jobs from earlier results of the same configuration (exact lengths,
    else the same model and engine scaled by tokens): total seconds, per host, and how many had no history."""
    exact = _durations(session, list(EXACT), jobs) if jobs else {}
    missing = [j for j in jobs if tuple(getattr(j, k) for k in EXACT) not in exact]
    coarse = _durations(session, ["model", "engine"], missing) if missing else {}
    total, per_host, unknown = 0.0, {}, 0
    for j in jobs:
        s = exact.get(tuple(getattr(j, k) for k in EXACT))
        if s is None and (j.model, j.engine) in coarse:
            s = coarse[(j.model, j.engine)] * (j.n_prompt + j.n_gen + j.n_depth)
        if s is None:
            unknown += 1
            continue
        s *= j.repetitions
        total += s
        host = j.host or "any"
        per_host[host] = per_host.get(host, 0.0) + s
    return {"total_s": total, "per_host_s": per_host, "unknown_jobs": unknown, "jobs": len(jobs)}
