"""What the scheduler's two state machines share, campaigns (``campaigns.state``) and bisections (``bisections``):
the watch document a row follows, stepping every active row, and enqueueing the sweep a step decided on.

A step decides inside one transaction and enqueues its sweep after that transaction commits
(``siliconbench.coordinator.fleet.sweeps.submit_once`` has its own), then records the sweep in a second one; a sweep the fleet
refuses ends the row instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session

from siliconbench.contract.errors import UserError
from siliconbench.contract.spec import SweepSpec

from siliconbench.coordinator.fleet import sweeps as fleet
from siliconbench.storage.database import session_scope
from siliconbench.storage.watch_tables import Campaign, Watch

log = logging.getLogger(__name__)


def watch_doc(session: Session, c: Campaign | None) -> dict:
    """The stored spec of the watch a campaign belongs to ({} when either is gone)."""
    w = session.get(Watch, c.watch) if c is not None else None
    return dict(w.spec or {}) if w is not None else {}


def enqueue(
    database_url: str,
    broker_url: str,
    spec: SweepSpec,
    sweep_id: str,
    *,
    refused: Callable[[Session, UserError], None],
    enqueued: Callable[[Session], None],
) -> str | None:
    """Submit the step's sweep (once), then ``enqueued`` in a transaction of its own; when the fleet cannot run it
    (a host went away, a model changed), ``refused`` ends the row instead and the line saying so is returned."""
    try:
        fleet.submit_once(database_url, broker_url, spec, sweep_id)
    except UserError as exc:
        with session_scope(database_url) as s:
            refused(s, exc)
        return f"failed: could not enqueue {sweep_id}: {exc.message}"
    with session_scope(database_url) as s:
        enqueued(s)
    return None


def step_all(
    database_url: str, table, active: tuple[str, ...], advance: Callable[[int], str], what: str
) -> dict[int, str]:
    """One step (``advance(id)``) of every row of ``table`` in an ``active`` status, oldest first; one row's error is
    its line (logged with its traceback, tried again next tick), not the others' end."""
    with session_scope(database_url) as s:
        ids = list(s.scalars(select(table.id).where(table.status.in_(active)).order_by(table.id)))
    out = {}
    for row_id in ids:
        try:
            out[row_id] = advance(row_id)
        except Exception as exc:
            log.exception("%s %s: step failed", what, row_id)
            out[row_id] = f"error: {type(exc).__name__}: {exc}"
    return out
