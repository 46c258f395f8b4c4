"""A campaign's state machine, driven by the scheduler's tick: ``advance`` one, ``advance_all`` the active ones.

States (``Campaign.status``):

- **preparing**: each target host makes the environments it lacks (``campaign_prepare``). Once every host has
  reported, a failed host's reason goes to ``error`` (and ``verdicts["hosts"]``); with no ready host the
  campaign is **failed** and a ``campaign_failed`` notification is queued; otherwise look 1 is enqueued.
- **running**: one sweep per look (``campaign_looks``: ``sweep_ids``, ``look``). When a look's jobs are all
  finished, every series is decided per host with ``sequential.decide`` over all looks so far; while a series
  is undecided on some host and looks remain, the next look is enqueued. Then suspects and fleet verdicts
  (``campaign_verdicts``); a change seen only on a single-host SKU first gets one confirmation sweep
  (``verdicts["phase"]`` "confirming"), then the verdicts are final.
- **done**: ``verdicts`` holds every series' verdict; each regression or improvement is a finding and a
  notification. **failed**: ``error`` says why.

Every step is idempotent and safe to repeat: a sweep's id is fixed by the campaign and look, so a step that
enqueued a sweep and died before recording it finds the sweep and records it; prepare tasks are sent once per
version and host; findings, suspects and notifications are keyed. Sweeps are submitted after the campaign's
transaction commits (``siliconbench.coordinator.fleet.sweeps.submit_sweep`` has its own), then recorded in a second one.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from siliconbench.contract.errors import UserError
from siliconbench.contract.spec import COMPARE_PROCESSES, SweepSpec
from siliconbench.contract.watch_spec import LLAMA_CPP

from siliconbench.coordinator.fleet import sweeps as fleet
from siliconbench.coordinator.fleet.peers import sku_of, worker_points
from siliconbench.coordinator.watch import bisections
from siliconbench.coordinator.watch.campaigns.looks import (
    decisions,
    group,
    look_spec,
    look_sweep_id,
    looks_of,
    metrics_of,
    sweep_spec,
    undecided,
)
from siliconbench.coordinator.watch.campaigns.prepare import prepare
from siliconbench.coordinator.watch.campaigns.verdicts import conclude, needing_confirmation, publish
from siliconbench.coordinator.watch.notify import queue_notification, webhook_of
from siliconbench.coordinator.watch.stepping import enqueue, step_all, watch_doc
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import Host, utcnow
from siliconbench.storage.watch_tables import Campaign

log = logging.getLogger(__name__)
ACTIVE = ("preparing", "running")


@dataclass
class Step:
    """What one step decided: a line for the tick's report, and maybe a sweep to enqueue once it committed."""

    message: str
    sweep_id: str | None = None
    spec: SweepSpec | None = None
    kind: str = "look"  # or "confirm"


def fail(session: Session, c: Campaign, doc: dict, why: str) -> None:
    c.status, c.error, c.updated_at = "failed", why, utcnow()
    queue_notification(
        session,
        kind="campaign_failed",
        key=f"campaign {c.id}:failed",
        url=webhook_of(doc),
        payload={
            "watch": c.watch,
            "campaign_id": c.id,
            "package": c.package,
            "engine": c.engine,
            "baseline": c.baseline,
            "candidate": c.candidate,
            "error": why,
            "command": (
                f"siliconbench env add llama.cpp --source {(doc.get('llama_cpp') or {}).get('source')} --ref {c.candidate}"
                if c.package == LLAMA_CPP and (doc.get("llama_cpp") or {}).get("source")
                else f"siliconbench env add {c.package}=={c.candidate}"
            ),
        },
    )


def _preparing(session: Session, broker_url: str, c: Campaign, doc: dict) -> Step:
    res = prepare(session, broker_url, c, doc)
    if res is None:
        pending = [h for h, v in c.verdicts["hosts"].items() if v.get("status") is None]
        return Step(f"preparing: waiting for {len(pending) or 'the'} host(s) to report")
    ready, failed = res
    c.error = "; ".join(f"{h}: {(why.strip().splitlines() or ['failed'])[0]}" for h, why in failed.items()) or None
    if not ready:
        fail(session, c, doc, c.error or "no target host")
        return Step(f"failed: no host could prepare {c.package} {c.candidate}")
    c.verdicts = {**c.verdicts, "ready": ready}
    return Step(
        f"preparing: {len(ready)} host(s) ready, look 1 enqueued", look_sweep_id(c, 1), look_spec(c, doc, 1, ready)
    )


def _running(session: Session, c: Campaign, doc: dict) -> Step:
    v = copy.deepcopy(c.verdicts or {})  # a copy: SQLAlchemy writes a JSON column only when it differs
    confirming = v.get("phase") == "confirming"
    current = v["confirm"]["sweep_id"] if confirming else c.sweep_ids[-1]
    left = fleet.unfinished(session, current)
    if left:
        return Step(f"running: {current} has {left} job(s) to go")
    metrics, looks, hosts = metrics_of(doc), looks_of(doc), list(v.get("ready") or c.hosts)
    points = worker_points(session, c.sweep_ids)
    series = group(points, c, metrics, c.sweep_ids)
    decided = decisions(series, hosts, looks)
    if not confirming:
        still = undecided(decided)
        v["looks"][-1]["undecided"] = sorted({f"{series[k].label} · {k[1]}" for k in still})
        c.verdicts = v
        if still and c.look < len(looks):
            return Step(
                f"running: {len(still)} series undecided after look {c.look}, look {c.look + 1} enqueued",
                look_sweep_id(c, c.look + 1),
                look_spec(c, doc, c.look + 1, hosts),
            )
    skus = {h.name: sku_of(h) for h in session.scalars(select(Host).where(Host.name.in_(hosts)))}
    again = group(worker_points(session, [current]), c, metrics, [current]) if confirming else None
    out = conclude(session, c, series, decided, points, skus, metrics, webhook_of(doc), again)
    need = [] if confirming else needing_confirmation(out["series"])
    if need:
        c.verdicts = {**v, **out}
        sid = f"campaign-{c.id}-confirm"
        return Step(
            f"running: a change on single-host SKU(s) to confirm on {', '.join(need)}",
            sid,
            sweep_spec(c, doc, need, name=sid, processes=COMPARE_PROCESSES),
            kind="confirm",
        )
    n = publish(session, c, series, out, webhook_of(doc))
    c.verdicts = {**v, **out, "phase": "done"}
    c.status, c.updated_at = "done", utcnow()
    started = bisections.start(session, c, doc, out)  # a llama.cpp tag's regression: searched to its commit
    return Step(f"done: {n} finding(s), {len(out['suspects'])} suspect host(s)" + (f"; {started}" if started else ""))


def _record(c: Campaign, step: Step) -> None:
    """The enqueued sweep in the campaign (once: a repeated step finds it recorded)."""
    v = copy.deepcopy(c.verdicts or {})
    entry = {"sweep_id": step.sweep_id, "processes": step.spec.processes, "hosts": list(step.spec.hosts)}
    if step.kind == "confirm":
        v.update(phase="confirming", confirm=entry)
    elif step.sweep_id not in (c.sweep_ids or []):
        c.sweep_ids = [*(c.sweep_ids or []), step.sweep_id]
        c.look = len(c.sweep_ids)
        v.update(phase="looks", looks=[*(v.get("looks") or []), {"look": c.look, **entry}])
    c.verdicts, c.status, c.updated_at = v, "running", utcnow()


def _url(session_or_url) -> str:
    if isinstance(session_or_url, Session):  # its engine's URL: the steps run their own transactions
        return session_or_url.get_bind().url.render_as_string(hide_password=False)
    return str(session_or_url)


def advance(session_or_url, broker_url: str, campaign_id: int) -> str:
    """One step of one campaign; what it did, in a line."""
    url = _url(session_or_url)
    with session_scope(url) as s:
        c = s.get(Campaign, campaign_id, with_for_update=True)
        if c is None:
            return f"no campaign {campaign_id}"
        if c.status not in ACTIVE:
            return c.status
        doc = watch_doc(s, c)
        step = _preparing(s, broker_url, c, doc) if c.status == "preparing" else _running(s, c, doc)
    if step.sweep_id is None:
        return step.message

    def refused(s: Session, exc: UserError) -> None:
        c = s.get(Campaign, campaign_id, with_for_update=True)
        fail(s, c, watch_doc(s, c), f"could not enqueue {step.sweep_id}: {exc.field}: {exc.message}")

    def enqueued(s: Session) -> None:
        _record(s.get(Campaign, campaign_id, with_for_update=True), step)

    return enqueue(url, broker_url, step.spec, step.sweep_id, refused=refused, enqueued=enqueued) or step.message


def advance_all(session_or_url, broker_url: str) -> dict[int, str]:
    """One step of every active campaign, oldest first; a campaign's error is its line, not the others' end."""
    url = _url(session_or_url)
    return step_all(url, Campaign, ACTIVE, lambda cid: advance(url, broker_url, cid), "campaign")
