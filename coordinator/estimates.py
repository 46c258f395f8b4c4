"""The Sweeps page's duration estimate of a planned sweep, from the newest earlier results of each configuration.

Bounded by the plan, not by the size of history: for each configuration the plan holds, the newest
``RECENT`` ok results (an index range scan of ``ix_jobs_duration_key``, newest first), so the estimate
follows the fleet as it is now (a new engine release, a faster Mac) and costs the same after a year.
"""

from __future__ import annotations

from sqlalchemy import and_, select, union_all
from sqlalchemy.orm import Session

from storage.tables import Job, Result

EXACT = ("model", "engine", "quant", "n_prompt", "n_gen", "n_depth")
COARSE = ("model", "engine")
RECENT = 20  # results per configuration: enough for a stable mean, few enough to track today's fleet


def _durations(session: Session, keys: tuple[str, ...], jobs) -> dict[tuple, float]:
    """Mean seconds per repetition of the newest RECENT ok results per ``keys`` (job columns) of ``jobs``."""
    cols = [getattr(Job, k) for k in keys]
    per_rep = Result.wall_s / Job.repetitions  # warmup included in wall_s: assumes the usual 1 warmup
    if "n_prompt" not in keys:  # coarser fallback: seconds per repetition and token
        per_rep = per_rep / (Job.n_prompt + Job.n_gen + Job.n_depth)
    wanted = sorted({tuple(getattr(j, k) for k in keys) for j in jobs})
    parts = []
    for i, key in enumerate(wanted):  # one short index range scan per configuration
        newest = (select(*(c.label(k) for k, c in zip(keys, cols)), per_rep.label("s"))
                  .join(Result, Result.job_id == Job.id)
                  .where(and_(*(c == v for c, v in zip(cols, key))), Result.status == "ok", Result.wall_s.is_not(None))
                  .order_by(Job.created_at.desc()).limit(RECENT)).subquery(f"k{i}")
        parts.append(select(newest))
    sums: dict[tuple, list[float]] = {}
    for r in session.execute(union_all(*parts)) if parts else ():
        sums.setdefault(tuple(r[:-1]), []).append(r[-1])
    return {k: sum(v) / len(v) for k, v in sums.items()}


def estimate_duration(session: Session, jobs) -> dict:
    """Estimated run time of planned jobs from earlier results of the same configuration (exact lengths,
    else the same model and engine scaled by tokens): total seconds, per host, and how many had no history."""
    exact = _durations(session, EXACT, jobs) if jobs else {}
    missing = [j for j in jobs if tuple(getattr(j, k) for k in EXACT) not in exact]
    coarse = _durations(session, COARSE, missing) if missing else {}
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
