"""Points read from the results store: the one place history touches the database (points.py stays pure,
so the statistics that take points import no database)."""

from __future__ import annotations

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from siliconbench.coordinator.history.points import Point, to_point
from siliconbench.storage.result_store import load_stored
from siliconbench.storage.tables import Job, ResultSummary, SampleRow


def load_points(session: Session, sweep_id: str | None = None, include_disturbed: bool = False) -> list[Point]:
    """Every successful stored result as a point (or one sweep's). A result whose raw samples were pruned
    (siliconbench.storage.retention) keeps its place through its summaries: each metric's median, as a reported value.
    Results that ran disturbed (thermally throttled, or contended: JobResult.disturbed) are left out unless
    ``include_disturbed``: a verdict never pools them with clean ones."""
    points = [
        to_point(s.job, s.result, s.host, s.created_at)
        for s in load_stored(session, sweep_id)
        if s.result.status == "ok" and (include_disturbed or not s.result.disturbed)
    ]
    rs = ResultSummary
    q = select(rs.job_id, rs.metric, rs.median).where(~exists().where(SampleRow.job_id == rs.job_id))
    if sweep_id is not None:
        q = q.join(Job, Job.id == rs.job_id).where(Job.sweep_id == sweep_id)
    by_id = {p.job_id: p for p in points}
    for job_id, metric, median in session.execute(q):
        if job_id in by_id:
            by_id[job_id].reported.setdefault(metric, median)
    return points
