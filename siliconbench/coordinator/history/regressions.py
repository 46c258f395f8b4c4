"""Change points in every series' history, and the findings they become.

Each series (``siliconbench.coordinator.history.points``) is ordered by version, then time; its points are the per-result
medians. ``ruptures``' PELT (least-squares cost on log values, so a step is a ratio) proposes steps,
with a BIC-style penalty ``2 sigma^2 log n`` where sigma is the robust (MAD) spread of consecutive
points, floored at 1%. PELT only proposes: each proposed step is kept when the results of the
segments either side of it pass ``compare``'s own test, each result (one process) a sample
(``siliconbench.coordinator.stats.significance``: Mann-Whitney U, p < alpha, and a Hodges-Lehmann ratio at least the
minimum effect away from 1, signed by the metric's direction); so a step needs at least 4 results on
each side, as a version-comparing sweep's processes give. Each kept step lists
the components (engine versions, llama.cpp commit, OS, Python, BLAS) that changed at that point.

Steps are stored as findings (table ``findings``, one per series, metric and step) so they can be
confirmed (``siliconbench.embedded.confirm``) and shown on the dashboard's Regressions page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from siliconbench.contract.engines import VERSION_COMPONENTS
from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import digest
from siliconbench.contract.metrics import HEADLINE

from siliconbench.coordinator.history.compare import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT, process_samples
from siliconbench.coordinator.history.points import (
    Point,
    changed_components,
    describe_changes,
    ordered,
    series_id,
    series_key,
    series_label,
)
from siliconbench.coordinator.history.selectors import Selector, check_keys, select as pick
from siliconbench.coordinator.stats.significance import Comparison, Verdict, compare_processes
from siliconbench.storage.tables import Finding, utcnow

NOISE_FLOOR = 0.01  # log-units: below 1% run-to-run spread the penalty stops shrinking
PENALTY = 2.0


def _need_ruptures():
    try:
        import ruptures  # noqa: F401
    except ImportError:
        raise UserError("regressions", "needs ruptures: pip install 'siliconbench[analysis]'.") from None


def change_points(values: list[float]) -> list[int]:
    """Indices i where a new segment starts (values[i-1] -> values[i]), as PELT proposes them."""
    _need_ruptures()
    import ruptures as rpt  # optional ([analysis] extra): only change-point search needs it

    n = len(values)
    if n < 2 or any(v is None or v <= 0 for v in values):
        return []
    y = np.log(np.asarray(values, dtype=float)).reshape(-1, 1)
    d = np.diff(y[:, 0])
    mad = float(np.median(np.abs(d - np.median(d)))) if n > 2 else 0.0
    sigma = max(1.4826 * mad / math.sqrt(2), NOISE_FLOOR)
    pen = PENALTY * sigma**2 * math.log(max(n, 2))
    ends = rpt.Pelt(model="l2", min_size=1, jump=1).fit(y).predict(pen=pen)
    return [e for e in ends if e < n]


@dataclass
class Step:
    series_id: str
    series: str
    metric: str
    index: int  # position in the ordered history of the first point after the step
    n_points: int
    order: str  # 'version' or 'time'
    before: Point  # last point before the step
    after: Point  # first point after it
    comparison: Comparison
    changes: dict[str, list]
    finding_id: int | None = None

    @property
    def key(self) -> str:
        return digest(
            {"series": self.series_id, "metric": self.metric, "before": self.before.job_id, "after": self.after.job_id}
        )

    def as_dict(self) -> dict:
        return {
            "finding_id": self.finding_id,
            "series": self.series,
            "series_id": self.series_id,
            "metric": self.metric,
            "index": self.index,
            "n_points": self.n_points,
            "order": self.order,
            "before_job": self.before.job_id,
            "after_job": self.after.job_id,
            "when": self.after.when.isoformat() if self.after.when else None,
            "changes": describe_changes(self.changes),
            **{k: v for k, v in self.comparison.as_dict().items() if k not in ("metric",)},
        }


def series_history(points: list[Point], metric: str) -> dict[str, list[Point]]:
    """series id -> its points in history order (points that measured ``metric``)."""
    groups: dict[str, list[Point]] = {}
    for p in points:
        if p.center(metric) is not None:
            groups.setdefault(series_id(p, metric), []).append(p)
    return {sid: ordered(pts)[0] for sid, pts in groups.items()}


def steps_of(
    pts: list[Point],
    metric: str,
    *,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    keep_all: bool = False,
) -> list[Step]:
    """The steps of one series' ordered history that pass compare's test (all proposals if keep_all)."""
    pts, order = ordered(pts)
    values = [p.center(metric) for p in pts]
    bounds = change_points(values)
    edges = [0, *bounds, len(pts)]
    out = []
    for j, b in enumerate(bounds):
        left, right = pts[edges[j] : b], pts[b : edges[j + 2]]
        comp = compare_processes(
            process_samples(left, metric), process_samples(right, metric), metric, alpha=alpha, min_effect=min_effect
        )
        if keep_all or comp.verdict in (Verdict.regression, Verdict.improvement):
            out.append(
                Step(
                    series_id(pts[0], metric),
                    series_label(pts[0], metric),
                    metric,
                    b,
                    len(pts),
                    order,
                    pts[b - 1],
                    pts[b],
                    comp,
                    changed_components(pts[b - 1], pts[b]),
                )
            )
    return out


def find_steps(
    points: list[Point],
    *,
    metrics=HEADLINE,
    selector: Selector | None = None,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    keep_all: bool = False,
) -> list[Step]:
    """Every kept step of every series (every proposed one if keep_all), regressions first, then by series."""
    _need_ruptures()
    if selector is not None:
        check_keys([("--where", selector)], points)
        points = pick(points, selector, "--where")
    out = []
    for metric in metrics:
        for pts in series_history(points, metric).values():
            out += steps_of(pts, metric, alpha=alpha, min_effect=min_effect, keep_all=keep_all)
    out.sort(key=lambda s: (s.comparison.verdict != Verdict.regression, s.series, s.metric, s.index))
    return out


# ------------------------------------------------------------------------------------------ findings


def save_findings(session: Session, steps: list[Step]) -> list[Step]:
    """Store each step as a finding (once: a step seen again keeps its finding and status)."""
    existing = {f.key: f for f in session.scalars(select(Finding).where(Finding.key.in_([s.key for s in steps])))}
    for s in steps:
        f = existing.get(s.key)
        if f is None:
            c = s.comparison
            f = Finding(
                key=s.key,
                series_id=s.series_id,
                series=s.series,
                series_key=series_key(s.after, s.metric),
                metric=s.metric,
                verdict=c.verdict.value,
                host=s.after.host,
                engine=s.after.engine,
                model=s.after.model,
                before_job_id=s.before.job_id,
                after_job_id=s.after.job_id,
                before=s.before.components,
                after=s.after.components,
                changes=s.changes,
                ratio=c.ratio,
                p_value=c.p_value,
                comparison=c.as_dict(),
                status="open",
            )
            session.add(f)
            session.flush()
            existing[s.key] = f
        s.finding_id = f.id
    return steps


def finding_dict(f: Finding) -> dict:
    return {
        "id": f.id,
        "series": f.series,
        "series_id": f.series_id,
        "metric": f.metric,
        "verdict": f.verdict,
        "host": f.host,
        "engine": f.engine,
        "model": f.model,
        "status": f.status,
        "changes": describe_changes(f.changes or {}),
        "ratio": f.ratio,
        "p_value": f.p_value,
        "comparison": f.comparison,
        "before_job_id": f.before_job_id,
        "after_job_id": f.after_job_id,
        "confirm_sweep_id": f.confirm_sweep_id,
        "confirm_result": f.confirm_result,
        "created_at": f.created_at.isoformat() if f.created_at else None,
        "updated_at": f.updated_at.isoformat() if f.updated_at else None,
    }


def list_findings(session: Session, status: str | None = None) -> list[dict]:
    q = select(Finding).order_by(Finding.created_at.desc(), Finding.id.desc())
    if status:
        q = q.where(Finding.status == status)
    return [finding_dict(f) for f in session.scalars(q)]


def get_finding(session: Session, finding_id: int) -> Finding:
    f = session.get(Finding, finding_id)
    if f is None:
        recent = [str(i) for i in session.scalars(select(Finding.id).order_by(Finding.id.desc()).limit(10))]
        raise UserError("FINDING", f"no finding {finding_id} in the database.", recent)
    return f


def set_status(session: Session, finding_id: int, status: str, **changes) -> None:
    f = get_finding(session, finding_id)
    f.status = status
    for k, v in changes.items():
        setattr(f, k, v)
    f.updated_at = utcnow()
    session.flush()


def history_points(points: list[Point], sid: str, metric: str) -> list[dict]:
    """One series' history for a plot: position, value, time, versions, and whether a step starts there."""
    pts = series_history(points, metric).get(sid, [])
    starts = {s.index: s for s in steps_of(pts, metric)} if len(pts) > 1 else {}
    rows = []
    for i, p in enumerate(pts):
        s = starts.get(i)
        rows.append(
            {
                "index": i,
                "value": p.center(metric),
                "when": p.when,
                "job_id": p.job_id,
                "sweep": p.sweep_name,
                "source": p.source,
                "versions": ", ".join(f"{k} {v}" for k, v in sorted(p.components.items()) if k in VERSION_COMPONENTS),
                "step": s.comparison.verdict.value if s else "",
                "changes": describe_changes(s.changes) if s else "",
            }
        )
    return rows
