"""The Sweeps page's duration estimate of a planned sweep, from the newest earlier results of each configuration.

Bounded by the plan, not by the size of history: for each configuration the plan holds, the newest
``RECENT`` ok results (an index range scan of ``ix_jobs_duration_key``, newest first; on PostgreSQL one
LATERAL join over the plan's configurations, elsewhere a UNION ALL of one scan each), so the estimate
follows the fleet as it is now (a new engine release, a faster Mac) and costs the same after a year.
"""

from __future__ import annotations

from sqlalchemy import column, func, literal, select, true, union_all, values
from sqlalchemy.orm import Session

from siliconbench.storage.tables import Job, Result

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

    def newest(match):  # the configuration's newest ok results, read backwards from ix_jobs_duration_key
        return (
            select(per_rep.label("s"))
            .select_from(Job)
            .join(Result, Result.job_id == Job.id)
            .where(*match, Result.status == "ok", Result.wall_s.is_not(None))
            .order_by(Job.created_at.desc())
            .limit(RECENT)
        )

    if session.get_bind().dialect.name == "postgresql":  # one short statement: LATERAL over the plan's keys
        k = values(*(column(name, c.type) for name, c in zip(keys, cols, strict=True)), name="k").data(wanted)
        x = newest([c == k.c[name] for name, c in zip(keys, cols, strict=True)]).lateral("x")
        q = select(*k.c, func.avg(x.c.s)).select_from(k).join(x, true()).group_by(*k.c)
        return {tuple(r[:-1]): r[-1] for r in session.execute(q)}
    parts = [
        select(*(literal(v).label(name) for name, v in zip(keys, key, strict=True)), n.c.s)
        for i, key in enumerate(wanted)
        for n in [newest([c == v for c, v in zip(cols, key, strict=True)]).subquery(f"k{i}")]
    ]
    sums: dict[tuple, list[float]] = {}
    for r in session.execute(union_all(*parts)) if parts else ():
        sums.setdefault(tuple(r[:-1]), []).append(r[-1])
    return {key: sum(v) / len(v) for key, v in sums.items()}


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
