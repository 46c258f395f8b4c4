"""A fleet bisection's steps, driven by the scheduler's tick: the driver of ``siliconbench.coordinator.bisection.search`` on
the fleet.

Each step asks the search what it wants next and does one thing toward it; a tick takes steps until one sends work,
waits or ends (``advance``), so a look's verdict and the next look's send never wait a tick apart:

- **building** a commit the search needs that the host has not built: the campaign's prepare task
  (``TASK_PREPARE_ENV``, the commit's full sha as its ref) goes to the host; the host's report echoes that ref
  (``campaign_hosts.request``), and only a report for it is taken (a redelivered older task's never is). A failed
  build skips the commit (named); no report within ``PREPARE_TIMEOUT_S`` fails the bisection, with why;
- **measuring**: one sweep per look, pinned to the host, its sides rotated round by round, each through its build's
  llama-bench; once it has run, its processes go to the search, which decides, asks for the next look, or moves
  on. A look's sweep that does not finish within ``LOOK_TIMEOUT_S`` fails the bisection, with why.

Every state that waits has a timeout; the end is announced once (``announce``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from siliconbench.contract.errors import UserError
from siliconbench.contract.queues import TASK_PREPARE_ENV, host_queue
from siliconbench.contract.spec import SweepSpec
from siliconbench.contract.watch_spec import LLAMA_CPP

from siliconbench.coordinator.bisection import record
from siliconbench.coordinator.bisection.search import Search, Want
from siliconbench.coordinator.fleet import sweeps as fleet
from siliconbench.coordinator.watch.campaigns.prepare import PREPARE_TIMEOUT_S, build_fields, versions_on
from siliconbench.coordinator.watch.notify import queue_notification, webhook_of
from siliconbench.coordinator.watch.stepping import enqueue, step_all, watch_doc
from siliconbench.storage.broker import send_task
from siliconbench.storage.campaign_hosts import env_reports, report_env
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import Host, utcnow
from siliconbench.storage.watch_tables import Bisection, Campaign

log = logging.getLogger(__name__)
ACTIVE = ("building", "measuring")
LOOK_TIMEOUT_S = 6 * 3600.0  # one look's sweep on one host: its jobs' timeouts are far below this


# Steps one tick may take for one bisection while each decides without sending or waiting (a look's verdict, a
# build's report, then the next look's send: three); a bound against a loop, not a budget.
MAX_STEPS_A_TICK = 16


@dataclass
class Step:
    message: str
    sweep_id: str | None = None
    spec: SweepSpec | None = None
    more: bool = False  # decided without sending or waiting: the next step need not wait for the next tick


def _fail(b: Bisection, search: Search, why: str) -> Step:
    search.fail(why)
    record.keep(b, search)
    return Step(f"failed: {why}")


def _since(stamp: str | None) -> float:
    return (utcnow() - datetime.fromisoformat(stamp)).total_seconds() if stamp else 0.0


def _building(session: Session, broker_url: str, b: Bisection, search: Search, index: int, doc: dict) -> Step:
    sha = record.commit_of(b, index)["sha"]
    cur = dict(b.current or {})
    if cur.get("building") != index:
        report_env(session, b.campaign_id, b.host, status="pending", request=sha)
        payload = {"campaign_id": b.campaign_id, "llama_cpp": build_fields(doc.get("llama_cpp") or {}, sha)}
        send_task(broker_url, TASK_PREPARE_ENV, payload, host_queue(b.host))
        b.current, b.status, b.updated_at = (
            {**cur, "building": index, "sent": utcnow().isoformat()},
            "building",
            utcnow(),
        )
        return Step(f"building {sha[:12]} on {b.host}: sent")
    row = env_reports(session, b.campaign_id).get(b.host)
    if row is None or row.get("request") != sha or row["status"] == "pending":
        if _since(cur.get("sent")) > PREPARE_TIMEOUT_S:
            return _fail(b, search, f"{b.host} did not report the build of {sha[:12]} for {PREPARE_TIMEOUT_S:.0f} s")
        return Step(f"building {sha[:12]} on {b.host}: waiting")
    b.current = {k: v for k, v in cur.items() if k not in ("building", "sent")}
    if row["status"] == "failed":
        search.skip(index, f"did not build: {row['error'] or 'failed'}")
        record.keep(b, search)
        return (
            Step(f"{sha[:12]} did not build: skipped", more=True) if not search.done else Step(f"done: {search.reason}")
        )
    label = (row.get("packages") or {}).get(LLAMA_CPP)
    if not label or label not in versions_on(session.get(Host, b.host), LLAMA_CPP):
        return _fail(b, search, f"{b.host} reported {label} built but does not advertise it; restart the worker")
    b.labels = {**(b.labels or {}), str(index): label}
    b.status = "measuring"
    return Step(f"built {label} on {b.host}", more=True)


def _attempt(search: Search, w: Want) -> list:
    """Which attempt of which look a sweep is sent for: a short side's rerun is another attempt of the same look."""
    return [w.step, w.look, search.retried]


def _measuring(session: Session, b: Bisection, search: Search, w: Want) -> Step:
    cur = dict(b.current or {})
    sweeps = record.step_of(b, w)
    if sweeps and cur.get("for") == _attempt(search, w):
        left = fleet.unfinished(session, sweeps[-1])
        if left:
            if _since(cur.get("sent")) > LOOK_TIMEOUT_S:
                return _fail(b, search, f"{sweeps[-1]} has {left} job(s) left after {LOOK_TIMEOUT_S:.0f} s")
            return Step(f"measuring: {sweeps[-1]} has {left} job(s) to go")
        before = len(search.steps)
        search.observe(record.samples(session, b, w, sweeps))
        record.keep(b, search)
        if search.done:
            return Step(f"done: {search.outcome}: {search.reason}")
        return Step(
            f"step {w.step} decided: {search.steps[-1]['verdict']}" if len(search.steps) > before else "next look",
            more=True,
        )
    have = record.samples(session, b, w, sweeps)
    sid, spec = record.look_sweep(b, w, have, hosts=[b.host], placement="each")
    return Step(f"measuring {' · '.join(record.label(b, i) for i in w.sides)}: look {w.look}", sid, spec)


def announce(session: Session, b: Bisection, doc: dict) -> None:
    """The bisection's end, once, to the watch's webhook (and ``regressions --since``): the first bad commit with
    its effect, the suspects of an ambiguous one, or why there is none."""
    c = session.get(Campaign, b.campaign_id) if b.campaign_id else None
    rec = record.bisection_dict(b)
    effect = b.effect or {}
    queue_notification(
        session,
        kind="bisection",
        key=f"bisection {b.id}:end",
        url=webhook_of(doc),
        payload={
            "watch": c.watch if c else None,
            "campaign_id": b.campaign_id,
            "bisection_id": b.id,
            "finding_id": b.finding_id,
            "host": b.host,
            "package": LLAMA_CPP,
            "baseline": b.good.get("label"),
            "candidate": b.bad.get("label"),
            "metric": b.metric,
            "outcome": b.outcome or b.status,
            "reason": rec["reason"],
            "first_bad": b.first_bad,
            "suspects": rec["suspects"],
            "notes": rec["notes"],
            "ratio": effect.get("ratio"),
            "ci_low": effect.get("ci_low"),
            "ci_high": effect.get("ci_high"),
            "error": b.error,
            "steps": len(b.steps or []),
            "command": f"siliconbench watch bisections --watch {c.watch}" if c else None,
        },
    )


def _doc(session: Session, b: Bisection) -> dict:
    return watch_doc(session, session.get(Campaign, b.campaign_id))


def advance(database_url: str, broker_url: str, bisection_id: int) -> str:
    """Steps of one bisection until one sends work, waits or ends; what each did, in a line. A finished look's
    verdict and the next look's send happen in the same tick: at the default 60 s tick, waiting for the next one
    left the host idle for up to a minute a look."""
    said = []
    for _ in range(MAX_STEPS_A_TICK):
        message, more = _advance_once(database_url, broker_url, bisection_id)
        said.append(message)
        if not more:
            break
    return "; ".join(said)


def _advance_once(database_url: str, broker_url: str, bisection_id: int) -> tuple[str, bool]:
    """One step of one bisection: what it did, and whether the next step may follow at once."""
    with session_scope(database_url) as s:
        b = s.get(Bisection, bisection_id, with_for_update=True)
        if b is None:
            return f"no bisection {bisection_id}", False
        if b.status not in ACTIVE:
            return b.status, False
        doc = _doc(s, b)
        search = record.search_of(b)
        w = search.want()
        todo = record.unbuilt(b, w) if w else []
        if w is None:
            record.keep(b, search)
            step = Step(f"done: {search.outcome}")
        elif todo:
            step = _building(s, broker_url, b, search, todo[0], doc)
        else:
            step = _measuring(s, b, search, w)
        more = step.more and b.status in ACTIVE
        if b.status not in ACTIVE:
            announce(s, b, doc)
    if step.sweep_id is None:
        return step.message, more

    def refused(s: Session, exc: UserError) -> None:
        b = s.get(Bisection, bisection_id, with_for_update=True)
        _fail(b, record.search_of(b), f"could not enqueue {step.sweep_id}: {exc}")
        announce(s, b, _doc(s, b))

    def enqueued(s: Session) -> None:
        b = s.get(Bisection, bisection_id, with_for_update=True)
        search = record.search_of(b)
        w = search.want()
        record.record_sweep(b, w, step.sweep_id)
        b.current = {**b.current, "for": _attempt(search, w), "sent": utcnow().isoformat()}

    return (
        enqueue(database_url, broker_url, step.spec, step.sweep_id, refused=refused, enqueued=enqueued) or step.message,
        False,
    )


def advance_all(database_url: str, broker_url: str) -> dict[int, str]:
    """One step of every active bisection, oldest first; one's error is its line, not the others' end."""
    return step_all(database_url, Bisection, ACTIVE, lambda bid: advance(database_url, broker_url, bid), "bisection")


__all__ = ["ACTIVE", "LOOK_TIMEOUT_S", "advance", "advance_all", "announce"]
