"""Verdicts reach people: the notifications outbox (table ``notifications``) and its webhook deliverer.

A verdict is queued once, by key (``queue_notification``, in the transaction that reached it), and delivered
later by ``deliver_due``: a POST of JSON, signed, retried with backoff until the receiver answers 2xx. Rows are
never deleted, so a receiver that is down loses nothing; the dashboard's Regressions page and
``siliconbench regressions --since`` read the same rows (``siliconbench.coordinator.watch.messages``).

Payloads (the campaign driver writes them; every value JSON):

- ``finding``: watch, campaign_id, package, engine, baseline, candidate (versions of ``package``), series
  (label), metric, verdict ('regression' | 'improvement'), ratio, ci_low, ci_high (95%), p_value,
  hosts (list), sku, command (the shell command that reproduces it).
- ``suspect_host``: host, sku, series, metric, ratio (host / peers), ci_low, ci_high, peers (list of hosts),
  campaign_id, command.
- ``campaign_failed``: watch, campaign_id, package, engine, baseline, candidate, error, command.
- ``bisection`` (its end, ``siliconbench.coordinator.watch.bisections``): watch, campaign_id, bisection_id, finding_id, host,
  package ('llama.cpp'), baseline, candidate (the two tags), metric, outcome ('found' | 'ambiguous' | 'equivalent'
  | 'improvement' | 'inconclusive' | 'failed'), reason (the search's sentence: what it rests on, what would resolve
  it), first_bad ({sha, number, subject, label} or null), suspects (an ambiguous end's commits), notes (a second
  regression), ratio, ci_low, ci_high (last good -> first bad, re-measured), error, steps, command.

Delivery is at-least-once: a deliverer that dies between the receiver's 2xx and its own commit sends that row
again. The body carries ``id`` (also the ``X-Siliconbench-Delivery`` header); **receivers dedupe on it**. The
body is the payload plus id, kind, key and message; ``X-Siliconbench-Signature: sha256=<hex>`` is the
HMAC-SHA256 of the exact body bytes with ``SILICONBENCH_WEBHOOK_SECRET`` (``verify_signature``). Without the
secret nothing is sent: each due row records why instead. Two deliverers at once never send the same row:
each row is taken ``FOR UPDATE SKIP LOCKED`` (PostgreSQL) and held until its outcome is committed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.error
import urllib.request
from datetime import datetime, timedelta

from pydantic import SecretStr
from sqlalchemy import or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from siliconbench.contract.settings import env_setting

from siliconbench.coordinator.watch.messages import message
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import utcnow
from siliconbench.storage.watch_tables import NOTIFICATION_KINDS, Notification

SECRET_VAR = "SILICONBENCH_WEBHOOK_SECRET"
BACKOFF_BASE_S = 5.0
BACKOFF_CAP_S = 3600.0
ERROR_CHARS = 500  # of a receiver's answer kept in last_error
NO_SECRET = f"{SECRET_VAR} is not set: not sent (webhooks are always signed)"


def webhook_of(doc: dict) -> str | None:
    """A watch document's ``notify.webhook``, if it has one."""
    return (doc.get("notify") or {}).get("webhook") if isinstance(doc.get("notify"), dict) else None


def queue_notification(
    session: Session, *, kind: str, key: str, payload: dict, url: str | None = None
) -> Notification | None:
    """Queue a verdict once: the new row, or None when ``key`` was queued already (by anyone, concurrently too)."""
    if kind not in NOTIFICATION_KINDS:
        raise ValueError(f"notification kind {kind!r} is not one of {', '.join(NOTIFICATION_KINDS)}")
    json.dumps(payload)  # refuse what could never be sent, here rather than at delivery
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    # ON CONFLICT DO NOTHING: a racing second writer neither fails nor aborts the caller's transaction.
    stmt = (
        dialect.insert(Notification)
        .values(kind=kind, key=key, payload=payload, url=url, created_at=utcnow(), attempts=0)
        .on_conflict_do_nothing(index_elements=["key"])
        .returning(Notification.id)
    )
    new_id = session.scalar(stmt)
    return session.get(Notification, new_id) if new_id is not None else None


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_signature(secret: str, body: bytes, header: str | None) -> bool:
    """For receivers: does ``header`` (X-Siliconbench-Signature) sign exactly ``body`` with ``secret``?"""
    return bool(secret) and bool(header) and hmac.compare_digest(sign(secret, body), header.strip())


def backoff_s(attempts: int) -> float:
    """Delay before the next try after ``attempts`` failed ones: 5 s, 10 s, 20 s, ... capped at an hour."""
    return min(BACKOFF_BASE_S * 2 ** max(attempts - 1, 0), BACKOFF_CAP_S)


def body_of(n: Notification) -> bytes:
    doc = {**n.payload, "id": n.id, "kind": n.kind, "key": n.key, "message": message(n.payload, n.kind)}
    return json.dumps(doc, sort_keys=True, default=str).encode()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a redirect would resend (or drop) the signed body elsewhere: count it as a failure


_OPENER = urllib.request.build_opener(_NoRedirect)


def post(url: str, body: bytes, headers: dict, timeout_s: float) -> str | None:
    """POST; None on a 2xx answer, else why not (status and the start of the answer, or the network error)."""
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with _OPENER.open(req, timeout=timeout_s) as resp:
            if 200 <= resp.status < 300:
                return None
            return f"HTTP {resp.status}: {resp.read(ERROR_CHARS).decode(errors='replace')}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}: {exc.read(ERROR_CHARS).decode(errors='replace')}"
    except (urllib.error.URLError, OSError, ValueError) as exc:  # refused, timed out, DNS, a malformed URL
        return f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"


def _due(now: datetime):
    return (
        select(Notification)
        .where(
            Notification.delivered_at.is_(None),
            Notification.url.is_not(None),
            or_(Notification.next_attempt_at.is_(None), Notification.next_attempt_at <= now),
        )
        .order_by(Notification.id)
    )


def deliver_due(database_url: str, *, now: datetime | None = None, timeout_s: float = 10.0, limit: int = 50) -> dict:
    """Send up to ``limit`` due notifications; returns counts (delivered, failed, refused) and the ids sent."""
    now = now or utcnow()
    secret = (env_setting("webhook_secret") or SecretStr("")).get_secret_value()
    out = {"delivered": 0, "failed": 0, "refused": 0, "delivered_ids": [], "failed_ids": []}
    if not secret:
        with session_scope(database_url) as s:
            ids = list(s.scalars(_due(now).with_only_columns(Notification.id).limit(limit)))
            if ids:
                s.execute(update(Notification).where(Notification.id.in_(ids)).values(last_error=NO_SECRET))
        out["refused"] = len(ids)
        return out
    for _ in range(limit):
        # One row a transaction, its lock held across the POST: a second deliverer skips it, and a crash
        # before the commit leaves it due (sent again: at-least-once).
        with session_scope(database_url) as s:
            n = s.scalars(_due(now).limit(1).with_for_update(skip_locked=True)).first()
            if n is None:
                break
            body = body_of(n)
            error = post(
                n.url,
                body,
                {
                    "Content-Type": "application/json",
                    "X-Siliconbench-Delivery": str(n.id),
                    "X-Siliconbench-Signature": sign(secret, body),
                    "User-Agent": "siliconbench-notify",
                },
                timeout_s,
            )
            n.attempts += 1
            n.last_error = error
            if error is None:
                n.delivered_at = now
                out["delivered"] += 1
                out["delivered_ids"].append(n.id)
            else:
                n.next_attempt_at = now + timedelta(seconds=backoff_s(n.attempts))
                out["failed"] += 1
                out["failed_ids"].append(n.id)
    return out
