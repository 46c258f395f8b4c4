"""A bisection as it is kept (the ``bisections`` table, on SQLite and PostgreSQL alike) and as people read it,
for both drivers: ``siliconbench.embedded.bisect`` (``regressions bisect`` on this machine) and the fleet's scheduler
(``siliconbench.coordinator.watch.bisections``). What the search decides is ``search.Search``; here is what the drivers share
around it: a new row, the state in and out, a step's processes read back from the stored results, a look's
sweep, and the record the CLI, the notification and the Regressions page show."""

from __future__ import annotations

import copy
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from siliconbench.contract.spec import SweepSpec

from siliconbench.coordinator.fleet.peers import worker_points
from siliconbench.coordinator.history.compare import process_samples
from siliconbench.storage.tables import utcnow
from siliconbench.storage.watch_tables import Bisection, Campaign

from .search import BISECT_LOOKS, DONE, FAILED, GOOD_END, Search, Want
from .sweeps import THROUGH, step_spec

FLEET, LOCAL = "fleet", "local"


def begin(
    session: Session,
    *,
    source: str,
    good: dict,
    bad: dict,
    commits: list[dict],
    metric: str,
    min_effect: float,
    suite: dict,
    host: str,
    runner: str,
    labels: dict[str, str] | None = None,
    campaign_id: int | None = None,
    finding_id: int | None = None,
    options: dict | None = None,
    looks: Sequence[int] = BISECT_LOOKS,
    finding_through: str = "",
) -> Bisection:
    """A new bisection row with a fresh search (``commits``: after ``good`` up to ``bad``, oldest first).
    ``finding_through``: how the regression was first measured, if a finding's; another path than the search's is
    said when the ends do not show it."""
    other = finding_through if finding_through not in ("", THROUGH) else ""
    search = Search([{**c} for c in commits], metric, min_effect, looks=list(looks), other_path=other)
    b = Bisection(
        campaign_id=campaign_id,
        finding_id=finding_id,
        runner=runner,
        host=host,
        source=source,
        metric=metric,
        min_effect=min_effect,
        suite=suite,
        good=good,
        bad=bad,
        commits=commits,
        labels=dict(labels or {}),
        skipped=[],
        status="building",
        current={"step": 0, "sweeps": []},
        steps=[],
        options=options or {},
        updated_at=utcnow(),
    )
    keep(b, search)
    session.add(b)
    session.flush()
    return b


def search_of(b: Bisection) -> Search:
    return Search.from_dict(copy.deepcopy(b.search))


def keep(b: Bisection, s: Search) -> None:
    """Write the search back (a copy: SQLAlchemy writes a JSON column only when it differs) with the columns
    queries read beside it."""
    b.search = copy.deepcopy(s.as_dict())
    b.lo, b.hi, b.skipped, b.steps = s.lo, s.hi, list(s.skipped), readable_steps(b, s)
    b.outcome = s.outcome
    b.first_bad = {**s.commits[s.first_bad], "label": label(b, s.first_bad)} if s.first_bad is not None else None
    b.effect = s.effect
    if s.done:
        b.status = "failed" if s.outcome == FAILED else "done"
        b.error = s.reason if s.outcome == FAILED else b.error
    b.updated_at = utcnow()


def readable_steps(b: Bisection, s: Search) -> list[dict]:
    """The search's steps as people read them: each with its commit, its sides' build labels and the sweeps its
    looks ran (a finished step keeps the sweeps it had; the one just decided takes the current ones)."""
    old, cur = list(b.steps or []), b.current or {}
    out = []
    for n, st in enumerate(s.steps, 1):
        sweeps = (old[n - 1].get("sweeps") if n <= len(old) else None) or (
            cur.get("sweeps") if cur.get("step") == n else []
        )
        sides = [label(b, i) or str(i) for i in st.get("sides") or []]
        out.append({**st, "commit": commit_of(b, st.get("index")), "sides": sides, "sweeps": list(sweeps or [])})
    return out


def commit_of(b: Bisection, index: int | None) -> dict:
    if index is None:
        return {}
    base = b.good if index == GOOD_END else (b.commits or [])[index]
    return {**base, "label": label(b, index) or base.get("label")}


def label(b: Bisection, index: int) -> str | None:
    """The build version label of commit ``index`` (-1 the good end), once it is built."""
    return (b.labels or {}).get(str(index))


def unbuilt(b: Bisection, w: Want) -> list[int]:
    return [i for i in w.sides if label(b, i) is None]


def step_of(b: Bisection, w: Want) -> list[str]:
    """The current step's sweeps (a new step starts with none)."""
    cur = b.current or {}
    return list(cur.get("sweeps") or []) if cur.get("step") == w.step else []


def samples(session: Session, b: Bisection, w: Want, sweeps: list[str]) -> dict[int, list]:
    """Each side's processes of this step, in the order they ran (sweep by sweep); the fleet's on its host only."""
    by_label = {label(b, i): i for i in w.sides}
    rank = {sid: i for i, sid in enumerate(sweeps)}
    out: dict[int, list] = {i: [] for i in w.sides}
    points = [p for p in worker_points(session, sweeps) if p.engine_version in by_label]
    if b.runner == FLEET:
        points = [p for p in points if p.host == b.host]
    for p in sorted(points, key=lambda p: (rank.get(p.sweep_id, 0), p.when)):
        raw = process_samples([p], b.metric)
        if raw:
            out[by_label[p.engine_version]].append(raw[0])
    return out


def look_sweep(b: Bisection, w: Want, have: dict[int, list], **more) -> tuple[str, SweepSpec]:
    """The next sweep of step ``w``: its sides interleaved (rotated round by round), as many processes as the
    side with fewest lacks for the look (a short side's rerun too)."""
    sweeps = step_of(b, w)
    sid = f"bisection-{b.id}-step{w.step}-{len(sweeps) + 1}"
    lacking = max(1, w.processes - min(len(v) for v in have.values()))
    return sid, step_spec(b.suite, [label(b, i) for i in w.sides], lacking, sid, **more)


def record_sweep(b: Bisection, w: Want, sweep_id: str) -> None:
    sweeps = step_of(b, w)
    if sweep_id not in sweeps:
        sweeps.append(sweep_id)
    b.current = {"step": w.step, "sweeps": sweeps}
    b.updated_at = utcnow()


def bisection_dict(b: Bisection) -> dict:
    """What the CLI's table, ``--format json``, the notification and the Regressions page show: the search's
    outcome and reason, every step with its commit, the suspects, the notes."""
    s = search_of(b) if b.search else None

    steps = list(b.steps or [])
    return {
        "id": b.id,
        "runner": b.runner,
        "campaign_id": b.campaign_id,
        "finding_id": b.finding_id,
        "host": b.host,
        "status": b.status,
        "source": b.source,
        "good": b.good,
        "bad": b.bad,
        "metric": b.metric,
        "min_effect": b.min_effect,
        "commits": len(b.commits or []),
        "looks": s.looks if s else [],
        "steps": steps,
        "outcome": b.outcome or b.status,
        "reason": s.reason if s else (b.error or ""),
        "exit_code": s.exit_code if s and s.done else None,
        "first_bad": b.first_bad,
        "suspects": [commit_of(b, i) for i in s.suspects] if s else [],
        "effect": b.effect,
        "effect_from_good": s.effect_from_good if s else None,
        "notes": s.notes if s else [],
        "skipped": [{**commit_of(b, x["index"]), **x} for x in (s.skipped if s else b.skipped or [])],
        "processes_run": s.processes_run if s else 0,
        "error": b.error,
        "started_at": b.created_at.isoformat(timespec="seconds") if b.created_at else "",
        "finished_at": b.updated_at.isoformat(timespec="seconds")
        if b.updated_at and b.status in ("done", "failed")
        else "",
    }


def list_bisections(session: Session, watch: str | None = None, runner: str | None = None) -> list[dict]:
    """Every bisection, newest first: the fleet's and this machine's, from the one table."""
    q = select(Bisection).order_by(Bisection.id.desc())
    if watch:
        q = q.join(Campaign, Campaign.id == Bisection.campaign_id).where(Campaign.watch == watch)
    if runner:
        q = q.where(Bisection.runner == runner)
    return [bisection_dict(b) for b in session.scalars(q)]


__all__ = ["DONE", "FLEET", "LOCAL", "begin", "bisection_dict", "keep", "list_bisections", "search_of"]
