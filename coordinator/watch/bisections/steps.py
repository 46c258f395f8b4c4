"""A bisection's steps, one per scheduler tick: building a midpoint on the host, measuring a step look by look,
deciding it, and announcing the end."""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from siliconbench.errors import UserError
from siliconbench.queues import TASK_PREPARE_ENV, host_queue
from siliconbench.spec import SweepSpec
from siliconbench.watch_spec import LLAMA_CPP

from coordinator.fleet import sweeps as fleet
from coordinator.fleet.peers import worker_points
from coordinator.history.bisect_sweeps import step_spec
from coordinator.history.compare import process_samples
from coordinator.stats.bisection import (
    BAD,
    comparison_dict,
    ends_decision,
    midpoint_decisions,
    midpoint_verdict,
    next_midpoint,
)
from coordinator.stats.sequential import LOOKS, look_increment
from coordinator.stats.significance import Verdict
from coordinator.watch.campaigns.prepare import PREPARE_TIMEOUT_S, build_fields, versions_on
from coordinator.watch.notify import queue_notification, webhook_of
from coordinator.watch.stepping import enqueue, step_all, watch_doc
from storage.broker import send_task
from storage.campaign_hosts import env_reports, report_env
from storage.database import session_scope
from storage.tables import Host, utcnow
from storage.watch_tables import Bisection, Campaign

log = logging.getLogger(__name__)
ACTIVE = ("building", "measuring")


@dataclass
class Step:
    message: str
    sweep_id: str | None = None
    spec: SweepSpec | None = None


def _label_of(commit: dict) -> set[str]:
    """The version labels a build of ``commit`` can have (``worker.builds.source.Revision.label``)."""
    return {f"b{commit['number']}", f"b{commit['number']}+{commit['sha'][:7]}"}


def _step_no(b: Bisection) -> int:
    return len(b.steps or []) + 1


def _look_spec(b: Bisection, labels: list[str], look: int) -> tuple[str, SweepSpec]:
    sid = f"bisection-{b.id}-step{_step_no(b)}-look{look}"
    return sid, step_spec(b.suite, labels, look_increment(look), sid, hosts=[b.host], placement="each")


def _finish(b: Bisection, outcome: str, message: str) -> Step:
    b.status, b.outcome, b.updated_at = "done", outcome, utcnow()
    return Step(f"done: {message}")


def _fail(b: Bisection, why: str) -> Step:
    b.status, b.error, b.updated_at = "failed", why, utcnow()
    return Step(f"failed: {why}")


def _next(b: Bisection) -> Step:
    """Build the next midpoint, or end with the first bad commit."""
    skipped = {s["index"] for s in b.skipped or []}
    mid = next_midpoint([i for i in range(len(b.commits)) if i not in skipped], b.lo, b.hi)
    if mid is None:
        b.first_bad = {**b.commits[b.hi], "label": b.labels.get(str(b.hi))}
        return _finish(b, "found", f"first bad commit {b.first_bad['sha'][:12]} ({b.first_bad['subject']})")
    b.status, b.current, b.updated_at = "building", {"kind": "midpoint", "index": mid, "sent": None}, utcnow()
    return Step(f"building {b.commits[mid]['sha'][:12]} on {b.host}")


def _skip(b: Bisection, index: int, reason: str, sweeps: list[str] | None = None) -> Step:
    commit = b.commits[index]
    b.skipped = [*(b.skipped or []), {"index": index, **commit, "reason": reason[:300]}]
    b.steps = [
        *(b.steps or []),
        {
            "kind": "midpoint",
            "commit": commit,
            "sides": [],
            "verdict": "skipped",
            "sweeps": sweeps or [],
            "note": reason[:300],
        },
    ]
    log.info("bisection %s: %s skipped: %s", b.id, commit["sha"][:12], reason)
    return _next(b)


def _building(session: Session, broker_url: str, b: Bisection, doc: dict) -> Step:
    cur = dict(b.current)
    mid = cur["index"]
    commit = b.commits[mid]
    row = env_reports(session, b.campaign_id).get(b.host)
    if not cur.get("sent"):
        report_env(session, b.campaign_id, b.host, status="pending")
        payload = {"campaign_id": b.campaign_id, "llama_cpp": build_fields(doc.get("llama_cpp") or {}, commit["sha"])}
        send_task(broker_url, TASK_PREPARE_ENV, payload, host_queue(b.host))
        b.current = {**cur, "sent": utcnow().isoformat()}
        return Step(f"building {commit['sha'][:12]} on {b.host}: sent")
    if row is None or row["status"] == "pending":
        if utcnow() - datetime.fromisoformat(cur["sent"]) > timedelta(seconds=PREPARE_TIMEOUT_S):
            return _fail(b, f"{b.host} did not report the build of {commit['sha'][:12]} for {PREPARE_TIMEOUT_S:.0f} s")
        return Step(f"building {commit['sha'][:12]} on {b.host}: waiting")
    if row["status"] == "failed":
        return _skip(b, mid, f"did not build: {row['error'] or 'failed'}")
    label = (row.get("packages") or {}).get(LLAMA_CPP)
    if label not in _label_of(commit):
        return Step(f"building {commit['sha'][:12]} on {b.host}: waiting (a report for {label})")
    if label not in versions_on(session.get(Host, b.host), LLAMA_CPP):
        return _fail(b, f"{b.host} reported {label} built but does not advertise it; restart the worker")
    b.labels = {**b.labels, str(mid): label}
    labels = [b.labels[str(b.lo)], label, b.labels[str(b.hi)]]
    b.status, b.current = "measuring", {"kind": "midpoint", "index": mid, "labels": labels, "sweeps": []}
    sid, spec = _look_spec(b, labels, 1)
    return Step(f"measuring {label} between {labels[0]} and {labels[2]}: look 1", sid, spec)


def _samples(session: Session, b: Bisection, sweeps: list[str]) -> dict[str, list]:
    """Each side's processes on the bisection's host, in the order they ran."""
    rank = {sid: i for i, sid in enumerate(sweeps)}
    out: dict[str, list] = {label: [] for label in b.current["labels"]}
    points = [p for p in worker_points(session, sweeps) if p.host == b.host and p.engine_version in out]
    for p in sorted(points, key=lambda p: (rank.get(p.sweep_id, 0), p.when)):
        raw = process_samples([p], b.metric)
        if raw:
            out[p.engine_version].append(raw[0])
    return out


def _measuring(session: Session, b: Bisection) -> Step:
    cur = copy.deepcopy(b.current)
    labels, sweeps = cur["labels"], cur["sweeps"]
    look = len(sweeps)
    if look == 0:
        sid, spec = _look_spec(b, labels, 1)
        return Step(f"measuring {' · '.join(labels)}: look 1", sid, spec)
    left = fleet.unfinished(session, sweeps[-1])
    if left:
        return Step(f"measuring: {sweeps[-1]} has {left} job(s) to go")
    s = _samples(session, b, sweeps)
    if min(len(v) for v in s.values()) < LOOKS[look - 1]:
        short = ", ".join(f"{k} {len(v)}" for k, v in s.items())
        if cur["kind"] == "ends":
            return _fail(b, f"the tags' jobs failed on {b.host} (processes a side: {short})")
        return _skip(b, cur["index"], f"its jobs failed (processes a side: {short})", sweeps)
    more = look < len(LOOKS)
    if cur["kind"] == "ends":
        d = ends_decision(s[labels[0]], s[labels[1]], b.metric, min_effect=b.min_effect)
        if not d.decided and more:
            return _another_look(b, labels, look)
        verdict = d.verdict.value if d.decided else "undecided"
        b.steps = [
            *(b.steps or []),
            {
                "kind": "ends",
                "commit": b.bad,
                "sides": labels,
                "verdict": verdict,
                "processes": d.processes,
                "against_good": comparison_dict(d),
                "against_bad": None,
                "sweeps": sweeps,
            },
        ]
        b.effect = comparison_dict(d)
        if d.verdict != Verdict.regression:
            outcome = "no regression" if d.decided else "undecided"
            return _finish(b, outcome, f"{outcome} between {labels[0]} and {labels[1]} through their llama-bench")
        return _next(b)
    d1, d2 = midpoint_decisions(s[labels[0]], s[labels[1]], s[labels[2]], b.metric, min_effect=b.min_effect)
    verdict = midpoint_verdict(d1, d2)
    if verdict is None and more:
        return _another_look(b, labels, look)
    mid = cur["index"]
    b.steps = [
        *(b.steps or []),
        {
            "kind": "midpoint",
            "commit": {**b.commits[mid], "label": labels[1]},
            "sides": labels,
            "verdict": verdict or "undecided",
            "processes": min(d1.processes, d2.processes),
            "against_good": comparison_dict(d1),
            "against_bad": comparison_dict(d2),
            "sweeps": sweeps,
        },
    ]
    if verdict is None:
        return _finish(b, "undecided", f"{labels[1]} undecided at the last look")
    if verdict == BAD:
        b.hi, b.effect = mid, comparison_dict(d1)
    else:
        b.lo, b.effect = mid, comparison_dict(d2)
    return _next(b)


def _another_look(b: Bisection, labels: list[str], look: int) -> Step:
    sid, spec = _look_spec(b, labels, look + 1)
    return Step(f"measuring {' · '.join(labels)}: undecided after look {look}, look {look + 1}", sid, spec)


def announce(session: Session, b: Bisection, doc: dict) -> None:
    """The bisection's end, once, to the watch's webhook (and ``regressions --since``): the first bad commit with
    its effect, or why there is none."""
    c = session.get(Campaign, b.campaign_id)
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
            "first_bad": b.first_bad,
            "ratio": effect.get("ratio"),
            "ci_low": effect.get("ci_low"),
            "ci_high": effect.get("ci_high"),
            "error": b.error,
            "steps": len(b.steps or []),
            "command": f"siliconbench watch bisections --watch {c.watch}" if c else None,
        },
    )


def _record(b: Bisection, sweep_id: str) -> None:
    cur = copy.deepcopy(b.current)
    if sweep_id not in cur.setdefault("sweeps", []):
        cur["sweeps"].append(sweep_id)
    b.current, b.updated_at = cur, utcnow()


def _doc(session: Session, b: Bisection) -> dict:
    return watch_doc(session, session.get(Campaign, b.campaign_id))


def advance(database_url: str, broker_url: str, bisection_id: int) -> str:
    """One step of one bisection; what it did, in a line."""
    with session_scope(database_url) as s:
        b = s.get(Bisection, bisection_id, with_for_update=True)
        if b is None:
            return f"no bisection {bisection_id}"
        if b.status not in ACTIVE:
            return b.status
        doc = _doc(s, b)
        step = _building(s, broker_url, b, doc) if b.status == "building" else _measuring(s, b)
        if b.status not in ACTIVE:
            announce(s, b, doc)
    if step.sweep_id is None:
        return step.message

    def refused(s: Session, exc: UserError) -> None:
        b = s.get(Bisection, bisection_id, with_for_update=True)
        _fail(b, f"could not enqueue {step.sweep_id}: {exc}")
        announce(s, b, _doc(s, b))

    def enqueued(s: Session) -> None:
        _record(s.get(Bisection, bisection_id, with_for_update=True), step.sweep_id)

    return (
        enqueue(database_url, broker_url, step.spec, step.sweep_id, refused=refused, enqueued=enqueued) or step.message
    )


def advance_all(database_url: str, broker_url: str) -> dict[int, str]:
    """One step of every active bisection, oldest first; one's error is its line, not the others' end."""
    return step_all(database_url, Bisection, ACTIVE, lambda bid: advance(database_url, broker_url, bid), "bisection")
