"""The Compare page's series: the identities matching the filters, each with its pooled statistics per metric.

Results are grouped by ``identity_hash`` (job key + environment): results of different identities are
never pooled; results of one identity (the same configuration measured again) are. The statistics are
read from the per-result summaries (``result_summaries``, written with each result by
``siliconbench.aggregate.summarize``), so a series costs one row per result and metric, not one per sample:

- count, mean, min and max pool exactly: N = sum n_i, M = sum n_i mean_i / N.
- the variance pools exactly too, in the numerically stable form
  (sum (n_i - 1) var_i + sum n_i (mean_i - M)^2) / (N - 1), never sum x^2 - N M^2, which cancels to noise
  for byte counts (values ~6e7 with a variance ~1).
- the median of a series is the median of its results' medians (each result is one process; its median
  is the per-process value compare and regressions already use). With one result that is the exact
  median of its samples; with several it is not the median of the pooled samples, by definition.

``peak_memory_bytes`` and ``load_s`` have one value per result (the results row) and are aggregated over
those values directly. Only the square root of the one variance per series is taken in Python (SQLite may
lack ``sqrt``). ``tests/test_dashboard.py`` checks all of it against ``summarize`` on both databases.
"""

from __future__ import annotations

import math

from sqlalchemy import Float, and_, case, cast, func, literal, select, union_all
from sqlalchemy.orm import Session

from storage.tables import Job, Result, ResultSummary

from .filters import JOB_METRICS, MAX_SERIES, SAMPLE_METRICS, Filters, conditions, engine_version, needs_jobs, \
    ok_results

_DESCRIPTION = (Job.engine, Job.model, Job.quant, Job.quant_level, Job.workload, Job.n_prompt, Job.n_gen, Job.n_depth,
                Result.hostname, Result.chip)
_ORDER = ("model", "quant_level", "n_prompt", "n_gen", "n_depth", "hostname", "engine", "engine_version",
          "identity_hash")


def _median(part, value):
    """Window columns for a portable median: the row's rank by ``value`` and the partition's size."""
    return (func.row_number().over(partition_by=part, order_by=value).label("rn"),
            func.count().over(partition_by=part).label("cnt"))


def _middle(rn, cnt, value):
    """The middle value, or the mean of the two middle values (statistics.median), of ranked rows."""
    return func.avg(case(((2 * rn).between(cnt, cnt + 2), value)))


def _pooled(sel, metrics):
    """count, mean, median, variance, min, max per (k, metric) pooled from the summaries of ``sel``'s results."""
    rs = ResultSummary
    s = (select(sel.c.k, rs.metric, rs.n, rs.mean, rs.median, rs.var, rs.min, rs.max, *_median([sel.c.k, rs.metric],
                                                                                               rs.median))
         .join(sel, sel.c.job_id == rs.job_id).where(rs.metric.in_(metrics))).subquery("s")
    g = (select(s.c.k, s.c.metric, func.sum(s.c.n).label("n"),
                (func.sum(s.c.n * s.c.mean) / cast(func.sum(s.c.n), Float)).label("mean"))
         .group_by(s.c.k, s.c.metric)).subquery("g")
    dev = s.c.mean - g.c.mean
    var = (func.sum((s.c.n - 1) * s.c.var) + func.sum(s.c.n * dev * dev)) / cast(func.nullif(g.c.n - 1, 0), Float)
    return (select(g.c.k, g.c.metric, g.c.n, g.c.mean, _middle(s.c.rn, s.c.cnt, s.c.median).label("median"),
                   var.label("var"), func.min(s.c.min).label("min"), func.max(s.c.max).label("max"))
            .join(g, and_(g.c.k == s.c.k, g.c.metric == s.c.metric)).group_by(g.c.k, g.c.metric, g.c.n, g.c.mean))


def _stats(values):
    """count, mean, median, variance, min, max per (k, metric) of ``values`` (a subquery: k, metric, value):
    window functions, two-pass variance (exact for byte counts), on both databases."""
    k, metric, v = values.c.k, values.c.metric, values.c.value
    part = [k, metric]
    w = select(k, metric, v, func.avg(v).over(partition_by=part).label("mean"), *_median(part, v)).subquery("w")
    dev = w.c.value - w.c.mean
    n = func.max(w.c.cnt)
    return select(w.c.k, w.c.metric, n.label("n"), func.max(w.c.mean).label("mean"),
                  _middle(w.c.rn, w.c.cnt, w.c.value).label("median"),
                  (func.sum(dev * dev) / cast(func.nullif(n - 1, 0), Float)).label("var"),
                  func.min(w.c.value).label("min"), func.max(w.c.value).label("max")).group_by(w.c.k, w.c.metric)


def _summary(row) -> dict:
    sd = math.sqrt(max(row.var, 0.0)) if row.var is not None else 0.0
    return {"mean": row.mean, "median": row.median, "stddev": sd, "min": row.min, "max": row.max, "count": int(row.n)}


def series(session: Session, f: Filters = Filters(), limit: int = MAX_SERIES,
           metrics=SAMPLE_METRICS + JOB_METRICS) -> tuple[list[dict], int]:
    """The identities matching ``f`` (the ``limit`` most recently measured) and how many match in all.

    Each row: the description (engine, model, quant, lengths, host, chip, engine_version), n_results,
    a job_id of one of its results, and ``metrics``: {metric: {mean, median, stddev, min, max, count}}.
    """
    latest = func.max(Result.created_at)
    # Lean first pass over every matching result: which identities, and how many there are in all.
    top = select(Result.identity_hash, func.count().over().label("total"))
    if needs_jobs(f):
        top = top.join(Job, Job.id == Result.job_id)
    top = (top.where(Result.status == "ok", *conditions(f)).group_by(Result.identity_hash)
           .order_by(latest.desc(), Result.identity_hash).limit(limit))
    picked = session.execute(top).all()
    if not picked:
        return [], 0
    total, ids = picked[0].total, [p.identity_hash for p in picked]
    # Then the description of those only.
    desc = (select(Result.identity_hash.label("identity_hash"), *(func.min(c).label(c.key) for c in _DESCRIPTION),
                   func.min(engine_version()).label("engine_version"), func.count().label("n_results"),
                   func.max(Result.job_id).label("job_id"), latest.label("created_at"))
            .join(Job, Job.id == Result.job_id).where(Result.status == "ok", *conditions(f),
                                                      Result.identity_hash.in_(ids))
            .group_by(Result.identity_hash))
    rows = [dict(r._mapping) for r in session.execute(desc)]
    stats: dict[str, dict] = {}
    sample_m = [m for m in metrics if m not in JOB_METRICS]
    job_m = [m for m in metrics if m in JOB_METRICS]
    if sample_m:
        for row in session.execute(_pooled(ok_results(f, ids).subquery("sel"), sample_m)):
            stats.setdefault(row.k, {})[row.metric] = _summary(row)
    if job_m:  # one value per result, straight from the results rows
        vals = union_all(*(ok_results(f, ids).with_only_columns(
            Result.identity_hash.label("k"), literal(m).label("metric"), cast(getattr(Result, m), Float).label("value"))
            .where(getattr(Result, m).is_not(None)) for m in job_m)).subquery("vals")
        for row in session.execute(_stats(vals)):
            stats.setdefault(row.k, {})[row.metric] = _summary(row)
    for r in rows:
        r["metrics"] = stats.get(r["identity_hash"], {})
    rows.sort(key=lambda r: tuple("" if r[c] is None else r[c] for c in _ORDER))
    return rows, total
