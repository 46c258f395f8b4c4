"""The watch's periodic work, one tick at a time fleet-wide: check due watches, advance campaigns and bisections,
deliver.

``tick`` runs under a database lock that every scheduler shares, so two schedulers started by mistake (or a
beat that fired twice) never check a watch or step a campaign at the same time: the second tick returns at
once, "skipped: another scheduler holds the lock".

- PostgreSQL: ``pg_try_advisory_lock`` on a connection of its own, held (in autocommit, no transaction left
  open) for the whole tick and released at its end; a scheduler that dies loses its connection and so the
  lock. A connection cut mid-tick also drops the lock: a second tick may then start while the first is still
  finishing its step; every step is idempotent (``siliconbench.coordinator.watch.campaigns.state``), so that costs no double work.
- SQLite (the embedded default, one machine): an exclusive ``flock`` on ``<database file>.scheduler.lock``
  beside the database file, which holds across processes of that machine (an in-memory database: a lock of
  this process).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import threading
from collections.abc import Iterator

from sqlalchemy import text

from siliconbench.coordinator.watch import bisections, notify, watches
from siliconbench.coordinator.watch.campaigns import state as campaigns
from siliconbench.storage.database import engine_for, normalize_url, session_scope
from siliconbench.storage.tables import utcnow

log = logging.getLogger(__name__)
SKIPPED = "skipped: another scheduler holds the lock"
# One fixed 64-bit key for the fleet's scheduler lock (pg advisory locks are keyed by a bigint).
LOCK_KEY = int.from_bytes(hashlib.sha256(b"siliconbench.scheduler").digest()[:8], "big", signed=True)
_MEMORY_LOCK = threading.Lock()


@contextlib.contextmanager
def fleet_lock(database_url: str) -> Iterator[bool]:
    """Try the scheduler's lock without waiting; yields whether this caller holds it."""
    url = normalize_url(database_url)
    if url.get_backend_name() == "postgresql":
        with engine_for(url).connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            held = bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": LOCK_KEY}).scalar())
            try:
                yield held
            finally:
                if held:
                    conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": LOCK_KEY})
        return
    if not url.database or url.database == ":memory:":
        held = _MEMORY_LOCK.acquire(blocking=False)
        try:
            yield held
        finally:
            if held:
                _MEMORY_LOCK.release()
        return
    with open(f"{url.database}.scheduler.lock", "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_checks(database_url: str, *, checker: str) -> dict[str, object]:
    """Check every due watch: {watch: new campaign ids, or the error}."""
    with session_scope(database_url) as s:
        names = watches.due(s, utcnow())
    out: dict[str, object] = {}
    for name in names:
        try:
            with session_scope(database_url) as s:
                out[name] = watches.check_watch(s, name, checker=checker)
        except Exception as exc:  # one watch's index being down is its own line, not the tick's end
            log.exception("watch %s: check failed", name)
            out[name] = f"error: {type(exc).__name__}: {exc}"
    return out


def tick(database_url: str, broker_url: str, *, checker: str) -> dict:
    """One tick: {"status": "ran" | SKIPPED, "checks": {watch: ...}, "campaigns": {id: line}, "bisections": {id:
    line}, "notifications": counts}."""
    with fleet_lock(database_url) as held:
        if not held:
            log.info("tick by %s: %s", checker, SKIPPED)
            return {"status": SKIPPED, "checker": checker}
        out = {"status": "ran", "checker": checker, "checks": run_checks(database_url, checker=checker)}
        out["campaigns"] = campaigns.advance_all(database_url, broker_url)
        out["bisections"] = bisections.advance_all(database_url, broker_url)
        out["notifications"] = notify.deliver_due(database_url)
    log.info(
        "tick by %s: checks %s, campaigns %s, bisections %s, notifications %s",
        checker,
        out["checks"],
        out["campaigns"],
        out["bisections"],
        {k: v for k, v in out["notifications"].items() if not k.endswith("_ids")},
    )
    return out
