"""What the watch concluded, for people: a notification's message, and the verdicts since a time.

``message`` is the one paragraph a webhook body, the dashboard and ``siliconbench regressions --since`` all
show; ``since`` lists the outbox's notifications (campaign findings, suspect hosts, failed campaigns, the ends
of bisections) and the change-point findings (table ``findings``) created since a time, newest first, one shape for both.
Payload keys: ``siliconbench.coordinator.watch.notify``'s docstring.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from siliconbench.contract.errors import UserError

from siliconbench.coordinator.history.regressions import finding_dict
from siliconbench.storage.tables import Finding, utcnow
from siliconbench.storage.watch_tables import Notification

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(m|min|h|d|w)\s*$", re.IGNORECASE)
UNIT_S = {"m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
SHOWN = 200  # the dashboard lists the newest, not all of history


def _num(x, fmt: str = ".3f") -> str:
    return format(x, fmt) if isinstance(x, (int, float)) else "?"


def _ci(p: dict) -> str:
    return f"95% CI {_num(p.get('ci_low'))}–{_num(p.get('ci_high'))}"


def _hosts(hosts) -> str:
    return ", ".join(hosts) if hosts else "no host named"


def infer_kind(payload: dict) -> str:
    if "bisection_id" in payload:
        return "bisection"
    if "error" in payload and "ratio" not in payload:
        return "campaign_failed"
    return "suspect_host" if "host" in payload and "candidate" not in payload else "finding"


def message(payload: dict, kind: str | None = None) -> str:
    """One paragraph: what changed (versions), where (series, metric, hosts), by how much (ratio, 95% CI),
    and the command that reproduces it."""
    p, kind = payload, kind or infer_kind(payload)
    versions = f"{p.get('package', '?')} {p.get('baseline', '?')} → {p.get('candidate', '?')}"
    where = (
        f"watch {p['watch']}, campaign {p.get('campaign_id', '?')}"
        if p.get("watch")
        else f"campaign {p.get('campaign_id', '?')}"
    )
    if kind == "finding":
        text = (
            f"{str(p.get('verdict', 'change')).capitalize()} in {versions}"
            + (f" ({p['engine']})" if p.get("engine") else "")
            + f", {where}: {p.get('metric', '?')} of "
            f"{p.get('series', '?')} is {_num(p.get('ratio'))}× the baseline ({_ci(p)}"
            + (f", p {_num(p['p_value'], '.2g')}" if p.get("p_value") is not None else "")
            + f") on {_hosts(p.get('hosts'))}"
            + (f" ({p['sku']})" if p.get("sku") else "")
            + "."
        )
    elif kind == "suspect_host":
        peers = p.get("peers") or []
        text = (
            f"Suspect host {p.get('host', '?')}"
            + (f" ({p['sku']})" if p.get("sku") else "")
            + f": {p.get('metric', '?')} of {p.get('series', '?')} is {_num(p.get('ratio'))}× its "
            f"{len(peers)} SKU peers' ({_ci(p)}; peers {_hosts(peers)}), campaign {p.get('campaign_id', '?')}."
        )
    elif kind == "bisection":
        fb = p.get("first_bad") or {}
        head = f"Bisection {p.get('bisection_id', '?')} of {versions} ({p.get('metric', '?')}) on {p.get('host', '?')}, {where}"
        if p.get("outcome") == "found":
            text = (
                f"{head}: first bad commit {fb.get('sha', '?')} (b{fb.get('number', '?')}) {fb.get('subject', '')!r}, "
                f"{_num(p.get('ratio'))}× the last good commit ({_ci(p)})."
            )
        elif p.get("outcome") == "ambiguous":
            suspects = ", ".join(f"{c.get('sha', '?')[:12]} (b{c.get('number', '?')})" for c in p.get("suspects") or [])
            text = f"{head}: ambiguous, the first bad commit could be any of {suspects}."
        elif p.get("outcome") == "failed":
            text = f"{head} failed: {p.get('error') or 'no reason recorded'}."
        else:  # equivalent, improvement, inconclusive: the search's own sentence says why
            text = f"{head}: {p.get('outcome', '?')} after {p.get('steps', '?')} step(s): {p.get('reason') or ''}."
    else:
        text = f"Campaign failed: {versions}, {where}: {p.get('error') or 'no reason recorded'}."
    return text + (f" Reproduce: {p['command']}" if p.get("command") else "")


def parse_since(text: str, now: datetime | None = None, field: str = "--since") -> datetime:
    """An ISO date (midnight UTC), an ISO date-time (UTC unless it says), or a duration back from now:
    30m, 24h, 7d, 2w."""
    now = now or utcnow()
    if m := DURATION.match(text or ""):
        return now - timedelta(seconds=float(m.group(1)) * UNIT_S[m.group(2).lower()])
    try:
        t = datetime.fromisoformat(text.strip())
    except (ValueError, AttributeError):
        raise UserError(
            field,
            f"{text!r} is neither a duration (30m, 24h, 7d, 2w) nor an ISO date or date-time "
            "(2026-12-01, 2026-12-01T08:00, 2026-12-01T08:00+01:00).",
        ) from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t  # a bare date is its midnight


def delivery(n: Notification) -> str:
    if n.delivered_at is not None:
        return "delivered"
    if n.url is None:
        return "no webhook"
    return "pending"


def notification_dict(n: Notification) -> dict:
    p = n.payload or {}
    return {
        "source": "notification",
        "id": n.id,
        "kind": n.kind,
        "key": n.key,
        "created_at": n.created_at.isoformat() if n.created_at else None,
        "message": message(p, n.kind),
        "campaign_id": p.get("campaign_id"),
        "series": p.get("series"),
        "metric": p.get("metric"),
        "ratio": p.get("ratio"),
        "delivery": delivery(n),
        "url": n.url,
        "attempts": n.attempts,
        "next_attempt_at": n.next_attempt_at.isoformat() if n.next_attempt_at else None,
        "delivered_at": n.delivered_at.isoformat() if n.delivered_at else None,
        "last_error": n.last_error,
        "payload": p,
    }


def _finding_row(f: Finding) -> dict:
    d = finding_dict(f)
    text = (
        f"{d['verdict'].capitalize()} step in {d['series']}: {d['metric']} ratio {_num(d['ratio'])}"
        + (f", p {_num(d['p_value'], '.2g')}" if d["p_value"] is not None else "")
        + f", what changed: {d['changes'] or 'nothing recorded'}. Confirm: siliconbench confirm {d['id']}"
    )
    return {
        "source": "finding",
        "id": d["id"],
        "kind": d["verdict"],
        "key": f.key,
        "created_at": d["created_at"],
        "message": text,
        "campaign_id": None,
        "series": d["series"],
        "metric": d["metric"],
        "ratio": d["ratio"],
        "delivery": d["status"],
        "url": None,
        "attempts": None,
        "next_attempt_at": None,
        "delivered_at": None,
        "last_error": None,
        "payload": d,
    }


def notifications(session: Session, *, since: datetime | None = None, limit: int | None = SHOWN) -> list[dict]:
    """The outbox, newest first: one query."""
    q = select(Notification).order_by(Notification.created_at.desc(), Notification.id.desc())
    if since is not None:
        q = q.where(Notification.created_at >= since)
    return [notification_dict(n) for n in session.scalars(q.limit(limit))]


def since(session: Session, when: datetime) -> list[dict]:
    """Notifications and change-point findings created at or after ``when``, newest first."""
    rows = notifications(session, since=when, limit=None)
    rows += [_finding_row(f) for f in session.scalars(select(Finding).where(Finding.created_at >= when))]
    return sorted(rows, key=lambda r: (r["created_at"] or "", r["source"], r["id"]), reverse=True)
