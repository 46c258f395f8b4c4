"""The read queries behind the dashboard's pages; every aggregate over raw samples is computed in SQL.

The statistics match ``siliconbench.aggregate.summarize`` over the measured (non-warmup) samples:
count, mean (``avg``), min, max, the median (mean of the middle one or two values, as
``statistics.median``, found with ``row_number()`` so the same SQL runs on SQLite and PostgreSQL) and
the sample variance ``sum((v - mean)^2) / (n - 1)`` (two-pass, so it stays exact for byte counts where
``sum(v*v) - sum(v)^2/n`` cancels). Only the square root of that one number is taken in Python, since
SQLite may be built without ``sqrt``; ``stddev`` is 0 for a single sample, as in ``summarize``.

Results are grouped by ``identity_hash`` (job key + environment): samples of different identities are
never pooled; results of the same identity (the same configuration measured again) are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy import Float, String, case, cast, false, func, literal, or_, select, union_all
from sqlalchemy.orm import Session

from .export import ENGINE_PACKAGE, load_records
from .models import Job, Result, SampleRow
from .store import load_stored

SAMPLE_METRICS = ("prefill_tps", "decode_tps", "ttft_ms")
JOB_METRICS = ("peak_memory_bytes", "load_s")  # one value per result, stored on the results row
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


def engine_version():
    """The engine package's version from the stored environment (llama-cpp-python / mlx-lm)."""
    whens = [(Job.engine == e, Result.environment[("packages", pkg)].as_string()) for e, pkg in ENGINE_PACKAGE.items()]
    return case(*whens, else_=None)


_COLUMNS = {"sweeps": Job.sweep_id, "hosts": Result.hostname, "chips": Result.chip, "models": Job.model,
            "engines": Job.engine, "workloads": Job.workload, "n_prompt": Job.n_prompt, "n_gen": Job.n_gen,
            "n_depth": Job.n_depth}


def _conditions(f: Filters) -> list:
    conds = [col.in_(getattr(f, name)) for name, col in _COLUMNS.items() if getattr(f, name)]
    if f.quants:
        conds.append(or_(Job.quant.in_(f.quants), Job.quant_level.in_(f.quants)))
    if f.engine_versions:
        conds.append(engine_version().in_(f.engine_versions))
    return conds


def _ok_results(f: Filters):
    return (select(Result.job_id, Result.identity_hash.label("k")).join(Job, Job.id == Result.job_id)
            .where(Result.status == "ok", *_conditions(f)))


def data_version(session: Session) -> tuple:
    """Changes whenever a result is stored: the pages' cache key, so new results show at once."""
    return tuple(session.execute(select(func.count(), func.max(Result.created_at))).one())


def filter_options(session: Session) -> dict[str, list]:
    """The distinct values each filter can take, over every stored result (one round trip)."""
    cols = {**_COLUMNS, "quants": Job.quant_level, "quant_exact": Job.quant, "engine_versions": engine_version()}
    parts = [select(literal(name).label("f"), cast(col, String).label("v")).join(Job, Job.id == Result.job_id)
             .select_from(Result).distinct() for name, col in cols.items()]
    out: dict[str, set] = {name: set() for name in cols}
    for name, value in session.execute(union_all(*parts)):
        if value is not None:
            out[name].add(int(value) if name in ("n_prompt", "n_gen", "n_depth") else value)
    out["quants"] |= out.pop("quant_exact")
    return {k: sorted(v) for k, v in out.items()}


def _stats(values, key_cols: list):
    """count, mean, median, variance, min, max of ``values`` (a subquery: keys..., metric, value)."""
    part = [*key_cols, values.c.metric]
    w = select(*part, values.c.value,
               func.avg(values.c.value).over(partition_by=part).label("mean"),
               func.count().over(partition_by=part).label("n"),
               func.row_number().over(partition_by=part, order_by=values.c.value).label("rn")).subquery("w")
    wk = [w.c[c.name] for c in part]
    dev = w.c.value - w.c.mean
    q = select(*wk, func.max(w.c.n).label("n"), func.max(w.c.mean).label("mean"),
               func.avg(case(((2 * w.c.rn).between(w.c.n, w.c.n + 2), w.c.value))).label("median"),
               (func.sum(dev * dev) / func.nullif(func.max(w.c.n) - 1, 0)).label("var"),
               func.min(w.c.value).label("min"), func.max(w.c.value).label("max")).group_by(*wk)
    return q


def _summary(row) -> dict:
    sd = math.sqrt(max(row.var, 0.0)) if row.var is not None else 0.0
    return {"mean": row.mean, "median": row.median, "stddev": sd, "min": row.min, "max": row.max, "count": row.n}


def series(session: Session, f: Filters = Filters(), metrics=SAMPLE_METRICS + JOB_METRICS) -> list[dict]:
    """One row per identity matching ``f``: its description and ``{metric: summary}`` (summarize's fields)."""
    sel = _ok_results(f).cte("sel")
    sample_m = [m for m in metrics if m not in JOB_METRICS]
    parts = [select(sel.c.k, SampleRow.metric, SampleRow.value).join(sel, sel.c.job_id == SampleRow.job_id)
             .where(SampleRow.warmup == false(), SampleRow.metric.in_(sample_m))] if sample_m else []
    for m in (m for m in metrics if m in JOB_METRICS):
        col = getattr(Result, m)
        parts.append(select(sel.c.k, literal(m).label("metric"), cast(col, Float).label("value"))
                     .join(sel, sel.c.job_id == Result.job_id).where(col.is_not(None)))
    values = union_all(*parts).subquery("vals")
    stats: dict[str, dict] = {}
    for row in session.execute(_stats(values, [values.c.k])):
        stats.setdefault(row.k, {})[row.metric] = _summary(row)

    ver = engine_version()
    desc = (select(Result.identity_hash.label("k"), *(func.min(c).label(c.key) for c in (
        Job.engine, Job.model, Job.quant, Job.quant_level, Job.workload, Job.n_prompt, Job.n_gen, Job.n_depth,
        Result.hostname, Result.chip)), func.min(ver).label("engine_version"), func.count().label("n_results"),
        func.max(Result.job_id).label("job_id"), func.max(Result.created_at).label("created_at"))
        .join(Job, Job.id == Result.job_id).where(Result.status == "ok", *_conditions(f))
        .group_by(Result.identity_hash)
        .order_by("model", "quant_level", "n_prompt", "n_gen", "n_depth", "hostname", "engine", "k"))
    return [dict(r._mapping, identity_hash=r.k, metrics=stats.get(r.k, {})) for r in session.execute(desc)]


def raw_samples(session: Session, f: Filters, metric: str, limit: int = MAX_RAW_SAMPLES) -> list[dict]:
    """Measured samples of one metric for the distribution plot: identity_hash, job_id, repetition, value."""
    sel = _ok_results(f).subquery("sel")
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
                Job.n_gen, Job.n_depth, Result.hostname, Result.created_at).join(Job, Job.id == Result.job_id)
         .order_by(Result.created_at.desc(), Result.job_id).limit(limit))
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
            "extra": s.result.extra, "wall_s": s.result.wall_s, "worker": s.worker}


def _durations(session: Session, keys: list[str], models: list[str]) -> dict[tuple, float]:
    """Mean seconds per repetition of earlier ok results, by ``keys`` (job columns)."""
    cols = [getattr(Job, k) for k in keys]
    per_rep = Result.wall_s / (Job.repetitions + Job.spec["warmup"].as_integer())
    if "n_prompt" not in keys:  # coarser fallback: seconds per repetition and token
        per_rep = per_rep / (Job.n_prompt + Job.n_gen + Job.n_depth)
    q = (select(*cols, func.avg(per_rep)).join(Job, Job.id == Result.job_id)
         .where(Result.status == "ok", Result.wall_s.is_not(None), Job.model.in_(models)).group_by(*cols))
    return {tuple(r[:-1]): r[-1] for r in session.execute(q)}


def estimate_duration(session: Session, jobs) -> dict:
    """Estimated run time of planned jobs from earlier results of the same configuration (exact lengths,
    else the same model and engine scaled by tokens): total seconds, per host, and how many had no history."""
    exact_keys = ["model", "engine", "quant", "n_prompt", "n_gen", "n_depth"]
    models = sorted({j.model for j in jobs})
    exact = _durations(session, exact_keys, models)
    coarse = _durations(session, ["model", "engine"], models)
    total, per_host, unknown = 0.0, {}, 0
    for j in jobs:
        s = exact.get(tuple(getattr(j, k) for k in exact_keys))
        if s is None and (j.model, j.engine) in coarse:
            s = coarse[(j.model, j.engine)] * (j.n_prompt + j.n_gen + j.n_depth)
        if s is None:
            unknown += 1
            continue
        s *= j.repetitions + j.warmup
        total += s
        host = j.host or "any"
        per_host[host] = per_host.get(host, 0.0) + s
    return {"total_s": total, "per_host_s": per_host, "unknown_jobs": unknown, "jobs": len(jobs)}


HEARTBEAT_STALE_S = 60  # a worker silent this long is shown offline, whatever its last flag said


def _engines(value) -> dict:
    """{name: version} from the hosts table's engines column (a mapping, or a list of names / records)."""
    if isinstance(value, dict):
        return dict(value)
    return {e.get("name") if isinstance(e, dict) else e: e.get("version") if isinstance(e, dict) else None
            for e in value or []}


def hosts(session: Session, now=None) -> list[dict]:
    """The hosts table with job counts, in ``fleet.list_hosts``'s shape (used when coordinator.fleet is absent)."""
    from .models import Host, utcnow

    now = now or utcnow()
    counts = {(w, st): n for w, st, n in session.execute(
        select(Job.worker, Job.status, func.count()).where(Job.worker.is_not(None), Job.status.in_(("ok", "failed")))
        .group_by(Job.worker, Job.status))}
    out = []
    for h in session.scalars(select(Host).order_by(Host.name)):
        fresh = h.last_heartbeat is not None and (now - h.last_heartbeat).total_seconds() < HEARTBEAT_STALE_S
        out.append({"name": h.name, "hostname": h.hostname, "chip": h.chip, "memory_bytes": h.memory_bytes,
                    "os": h.os, "engines": _engines(h.engines), "models": list(h.models or []),
                    "online": bool(h.online and fresh), "last_heartbeat": h.last_heartbeat,
                    "current_job_id": h.current_job_id, "jobs_done": counts.get((h.name, "ok"), 0),
                    "jobs_failed": counts.get((h.name, "failed"), 0)})
    return out
