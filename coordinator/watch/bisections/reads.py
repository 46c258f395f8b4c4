"""Bisections as people read them: the CLI's table and the Regressions page's timeline."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage.watch_tables import Bisection, Campaign


def bisection_dict(b: Bisection) -> dict:
    """A bisection in the shape ``embedded.bisect.Bisection.as_dict`` has, so one table and one timeline show both,
    with where it ran and its state."""
    return {
        "id": f"fleet-{b.id}",
        "fleet_id": b.id,
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
        "steps": [{**s, "sweep_id": (s.get("sweeps") or [""])[0]} for s in b.steps or []],
        "first_bad": b.first_bad,
        "effect": b.effect,
        "skipped": list(b.skipped or []),
        "outcome": b.outcome or b.status,
        "error": b.error,
        "started_at": b.created_at.isoformat(timespec="seconds") if b.created_at else "",
        "finished_at": b.updated_at.isoformat(timespec="seconds")
        if b.updated_at and b.status in ("done", "failed")
        else "",
    }


def list_bisections(session: Session, watch: str | None = None) -> list[dict]:
    q = select(Bisection).order_by(Bisection.id.desc())
    if watch:
        q = q.join(Campaign, Campaign.id == Bisection.campaign_id).where(Campaign.watch == watch)
    return [bisection_dict(b) for b in session.scalars(q)]
