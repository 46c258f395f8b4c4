"""The Compare page's series: the identities matching the filters, each with its pooled statistics per metric.

Results are grouped by ``identity_hash`` (job key + environment): results of different identities are
never pooled; results of one identity (the same configuration measured again) are. The statistics are
read from the per-result summaries (``result_summaries``, written with each result by
``siliconbench.contract.aggregate.summarize``), so a series costs one row per result and metric, not one per sample:

- count, mean, min and max pool exactly: N = sum n_i, M = sum n_i mean_i / N.
- the variance pools exactly too, in the numerically stable form
  (sum (n_i - 1) var_i + sum n_i (mean_i - M)^2) / (N - 1), never sum x^2 - N M^2, which cancels to noise
  for byte counts (values ~6e7 with a variance ~1).
- the median of a series is the median of its results' medians (each result is one process; its median
  is the per-process value compare and regressions already use). With one result that is the exact
  median of its samples; with several it is not the median of the pooled samples, by definition.

``peak_memory_bytes`` and ``load_s`` have one value per result (the results row), stored as summaries of
one value, so their median is the exact median over the results. Series are found among identities
(``result_identities``), not among results: every filter but the sweep is a fact of the identity.
Only the square root of the one variance per series is taken in Python (SQLite may
lack ``sqrt``). ``tests/dashboard/test_dashboard.py`` checks all of it against ``summarize`` on both databases.
"""

from __future__ import annotations

import math

from sqlalchemy import Float, case, cast, func, select
from sqlalchemy.orm import Session, aliased

from siliconbench.contract.metrics import RESULT_ROW_METRICS

from siliconbench.coordinator.reads.filters import (
    MAX_SERIES,
    SAMPLE_METRICS,
    Filters,
    conditions,
    engine_version,
    ok_results,
)
from siliconbench.storage.tables import Job, Result, ResultIdentity, ResultSummary

_DESCRIPTION = (
    Job.engine,
    Job.model,
    Job.quant,
    Job.quant_level,
    Job.workload,
    Job.n_prompt,
    Job.n_gen,
    Job.n_depth,
    Result.hostname,
    Result.chip,
)
_ORDER = (
    "model",
    "quant_level",
    "n_prompt",
    "n_gen",
    "n_depth",
    "hostname",
    "engine",
    "engine_version",
    "identity_hash",
)


def _pooled(rows, postgresql: bool):
    """count, mean, median, variance, min, max per (k, metric), pooled from summary ``rows`` (a select of k,
    metric, n, mean, median, var, min, max: one per result and metric).

    The pooled mean comes from a window over the partition (k, metric), so the variance's deviations need no
    second pass over the rows; the index already yields them in that order. The median of the medians:
    PostgreSQL's percentile_cont(0.5) (the mean of the two middle values, as statistics.median); elsewhere
    ranks from row_number().
    """
    r = rows.subquery("r")
    part = [r.c.k, r.c.metric]
    n_all = func.sum(r.c.n).over(partition_by=part)
    ranks = (
        ()
        if postgresql
        else (
            func.row_number().over(partition_by=part, order_by=r.c.median).label("rn"),
            func.count().over(partition_by=part).label("cnt"),
        )
    )
    s = select(
        r,
        *ranks,
        n_all.label("n_all"),
        (func.sum(r.c.n * r.c.mean).over(partition_by=part) / cast(n_all, Float)).label("m_all"),
    ).subquery("s")
    dev = s.c.mean - s.c.m_all
    n = func.max(s.c.n_all)
    var = (func.sum((s.c.n - 1) * s.c.var) + func.sum(s.c.n * dev * dev)) / cast(func.nullif(n - 1, 0), Float)
    median = (
        func.percentile_cont(0.5).within_group(s.c.median)
        if postgresql
        else func.avg(case(((2 * s.c.rn).between(s.c.cnt, s.c.cnt + 2), s.c.median)))
    )
    return select(
        s.c.k,
        s.c.metric,
        n.label("n"),
        func.max(s.c.m_all).label("mean"),
        median.label("median"),
        var.label("var"),
        func.min(s.c.min).label("min"),
        func.max(s.c.max).label("max"),
    ).group_by(s.c.k, s.c.metric)


def _summary(row) -> dict:
    sd = math.sqrt(max(row.var, 0.0)) if row.var is not None else 0.0
    return {"mean": row.mean, "median": row.median, "stddev": sd, "min": row.min, "max": row.max, "count": int(row.n)}


_SUMMARY = (
    ResultSummary.metric,
    ResultSummary.n,
    ResultSummary.mean,
    ResultSummary.median,
    ResultSummary.var,
    ResultSummary.min,
    ResultSummary.max,
)


def _in_sweeps(session: Session, f: Filters, limit: int):
    """Series of results of the chosen sweeps (a sweep is not a fact of an identity): bounded by the sweeps."""
    latest = func.max(Result.created_at)
    top = (
        select(Result.identity_hash, func.count().over().label("total"))
        .join(Job, Job.id == Result.job_id)
        .where(Result.status == "ok", *conditions(f))
        .group_by(Result.identity_hash)
        .order_by(latest.desc(), Result.identity_hash)
        .limit(limit)
    )
    picked = session.execute(top).all()
    if not picked:
        return [], 0, None
    ids = [p.identity_hash for p in picked]
    desc = (
        select(
            Result.identity_hash.label("identity_hash"),
            *(func.min(c).label(c.key) for c in _DESCRIPTION),
            func.min(engine_version()).label("engine_version"),
            func.count().label("n_results"),
            func.max(Result.job_id).label("job_id"),
            latest.label("created_at"),
        )
        .join(Job, Job.id == Result.job_id)
        .where(Result.status == "ok", *conditions(f), Result.identity_hash.in_(ids))
        .group_by(Result.identity_hash)
    )
    sel = ok_results(f, ids).subquery("sel")
    summaries = select(sel.c.k, *_SUMMARY).join(sel, sel.c.job_id == ResultSummary.job_id)
    return [dict(r._mapping) for r in session.execute(desc)], picked[0].total, summaries


def _of_identities(session: Session, f: Filters, limit: int):
    """Series found among identities (result_identities: every other filter is a fact of the identity, checked
    on its first ok result), each one's newest result and count read from the results index."""
    other = aliased(Result)
    mine = [other.identity_hash == ResultIdentity.identity_hash, other.status == "ok"]
    if not f.include_disturbed:
        mine.append(other.disturbed.is_not(True))
    latest = select(func.max(other.created_at)).where(*mine).scalar_subquery()
    rep = (
        select(ResultIdentity.identity_hash, latest.label("latest"))
        .join(Result, Result.job_id == ResultIdentity.job_id)
        .join(Job, Job.id == ResultIdentity.job_id)
        .where(*conditions(f, result_level=False))
    ).subquery("rep")
    top = (
        select(rep.c.identity_hash, func.count().over().label("total"))
        .where(rep.c.latest.is_not(None))
        .order_by(rep.c.latest.desc(), rep.c.identity_hash)
        .limit(limit)
    )
    picked = session.execute(top).all()
    if not picked:
        return [], 0, None
    ids = [p.identity_hash for p in picked]
    newest = select(other.job_id).where(*mine).order_by(other.created_at.desc(), other.job_id.desc()).limit(1)
    desc = (
        select(
            ResultIdentity.identity_hash,
            *(c.label(c.key) for c in _DESCRIPTION),
            engine_version().label("engine_version"),
            select(func.count()).where(*mine).scalar_subquery().label("n_results"),
            newest.scalar_subquery().label("job_id"),
            latest.label("created_at"),
        )
        .join(Result, Result.job_id == ResultIdentity.job_id)
        .join(Job, Job.id == ResultIdentity.job_id)
        .where(ResultIdentity.identity_hash.in_(ids))
    )
    rs = ResultSummary
    summaries = select(rs.identity_hash.label("k"), *_SUMMARY).where(
        rs.identity_hash.in_(ids), rs.status == "ok", *([] if f.include_disturbed else [rs.disturbed.is_not(True)])
    )
    return [dict(r._mapping) for r in session.execute(desc)], picked[0].total, summaries


def series(
    session: Session, f: Filters = Filters(), limit: int = MAX_SERIES, metrics=SAMPLE_METRICS + RESULT_ROW_METRICS
) -> tuple[list[dict], int]:
    """The identities matching ``f`` (the ``limit`` most recently measured) and how many match in all.

    Each row: the description (engine, model, quant, lengths, host, chip, engine_version), n_results,
    a job_id of one of its results (the newest, or the chosen sweeps' last), and ``metrics``:
    {metric: {mean, median, stddev, min, max, count}}, pooled from the results' summaries.
    """
    rows, total, summaries = (_in_sweeps if f.sweeps else _of_identities)(session, f, limit)
    if not rows:
        return [], 0
    stats: dict[str, dict] = {}
    for row in session.execute(
        _pooled(summaries.where(ResultSummary.metric.in_(metrics)), session.get_bind().dialect.name == "postgresql")
    ):
        stats.setdefault(row.k, {})[row.metric] = _summary(row)
    for r in rows:
        r["metrics"] = stats.get(r["identity_hash"], {})
    rows.sort(key=lambda r: tuple("" if r[c] is None else r[c] for c in _ORDER))
    return rows, total
