"""A regression the watch confirmed between two llama.cpp tags, bisected to its commit on the fleet.

When a campaign on llama.cpp's tags (``llama_cpp: {source: DIR}``) ends with a regression of what a build's
llama-bench measures (decode_tps, prefill_tps of a generate series), ``start`` records a bisection on a host that
confirmed it: the finding's series as a sweep, the commits between the two tags (``llama_tags.commits_between``,
first-parent line). The scheduler's tick then steps it (``advance``), as it steps campaigns:

- **measuring** a step: one sweep per look of the sequential design (5, 8, 11, 15 processes a side), pinned to
  the host, every side through its build's llama-bench (``coordinator.history.bisect_sweeps``). The first step is
  the two tags themselves (the campaign measured them through the binding; a search starts only when their
  llama-bench agrees there is a regression). Each later step is a midpoint between both current ends, decided by
  ``coordinator.stats.bisection``'s rules, the ones ``siliconbench regressions bisect`` applies on one machine.
  Each sweep rotates the sides round by round (``version_order: rotate``: A B C, B C A, C A B), as the embedded
  bisection does, so drift and a round's position fall on every side alike.
- **building** a midpoint: the campaign's prepare task (``TASK_PREPARE_ENV`` with the commit's sha) goes to the
  host, which builds it from its checkout and reports on the campaign's ``campaign_hosts`` row, with the build's
  version label. A report whose label is not this commit's (a redelivered older task) is not taken for it. A
  commit that does not build is skipped, as ``git bisect skip`` does, and named.

It ends **done** with an outcome: *found* (the first bad commit: sha, subject, build number, and the effect last
good → first bad with its interval), *no regression* (the tags' llama-bench did not confirm it), or *undecided*
(a step undecided at the last look: nothing is guessed); or **failed** with why. Every step's evidence is kept
(``steps``), and each step's sweeps are stored as any sweep is, so ``compare`` and the dashboard see them.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import select
from sqlalchemy.orm import Session

from siliconbench.errors import UserError
from siliconbench.jobs import JobSpec
from siliconbench.queues import TASK_PREPARE_ENV, host_queue
from siliconbench.spec import SweepSpec
from siliconbench.watch_spec import LLAMA_CPP

from coordinator.fleet import sweeps as fleet
from coordinator.fleet.peers import worker_points
from coordinator.history.bisect_sweeps import MEASURED, series_sweep, step_spec
from coordinator.history.compare import process_samples
from coordinator.stats.bisection import BAD, ends_decision, midpoint_decisions, midpoint_verdict, next_midpoint
from coordinator.stats.sequential import LOOKS
from coordinator.stats.significance import DEFAULT_MIN_EFFECT, Verdict
from coordinator.watch import llama_tags
from coordinator.watch.campaigns.prepare import PREPARE_TIMEOUT_S, build_fields, versions_on
from coordinator.watch.notify import queue_notification, webhook_of
from storage.broker import send_task
from storage.campaign_hosts import env_reports, report_env
from storage.database import session_scope
from storage.tables import Finding, Host, Job, utcnow
from storage.watch_tables import Bisection, Campaign, Watch

log = logging.getLogger(__name__)
ACTIVE = ("building", "measuring")
KEY = "bisection"  # in a campaign's verdicts: {"id": ...} or {"reason": why none was started}


@dataclass
class Step:
    message: str
    sweep_id: str | None = None
    spec: SweepSpec | None = None


# ----------------------------------------------------------------------------------------------- start


def _regression(verdicts: dict) -> tuple[str, str, dict] | None:
    """(series label, metric, verdict) of the campaign's regression to bisect: one a build's llama-bench measures,
    decode first (one bisection per campaign: the regressions of one tag pair are most often one commit's)."""
    found = [
        (label, metric, v)
        for label, by_metric in (verdicts.get("series") or {}).items()
        for metric, v in by_metric.items()
        if v.get("verdict") == "regression" and v.get("finding_id") and metric in MEASURED
    ]
    return min(found, key=lambda t: (t[1] != "decode_tps", t[0])) if found else None


def start(session: Session, c: Campaign, doc: dict, verdicts: dict) -> str:
    """Record the bisection of the campaign's regression, when there is one to search; what was done, in a line.
    The reason none was started is kept in ``c.verdicts["bisection"]`` too."""
    llama = doc.get("llama_cpp") or {}
    why = None
    picked = _regression(verdicts)
    if c.package != LLAMA_CPP or not llama.get("source") or not llama.get("bisect", True):
        return ""
    if picked is None:
        why = "no regression of decode_tps or prefill_tps to bisect"
    else:
        _label, metric, v = picked
        finding = session.get(Finding, v["finding_id"])
        job_row = session.get(Job, finding.before_job_id) if finding is not None else None
        job = JobSpec.model_validate(job_row.spec) if job_row is not None else None
        if job is None or job.workload != "generate":
            why = f"the regression is on a {job.workload if job else 'missing'} series; a bisection measures generate"
    if why is None:
        try:
            commits = llama_tags.commits_between(llama["source"], c.baseline, c.candidate)
        except llama_tags.TagsError as exc:
            why = f"cannot list the commits between {c.baseline} and {c.candidate}: {exc}"
    if why is not None:
        c.verdicts = {**(c.verdicts or {}), KEY: {"reason": why}}
        return f"no bisection: {why}"
    existing = session.scalars(select(Bisection).where(Bisection.finding_id == finding.id)).first()
    if existing is not None:
        return f"bisection {existing.id} already started"
    good = {**llama_tags.commit_of(llama["source"], c.baseline), "label": c.baseline, "tag": c.baseline}
    bad = {**commits[-1], "label": c.candidate, "tag": c.candidate}
    b = Bisection(
        campaign_id=c.id,
        finding_id=finding.id,
        host=v["changed_hosts"][0],
        source=llama["source"],
        metric=metric,
        min_effect=DEFAULT_MIN_EFFECT,
        suite=series_sweep(job, f"bisection-of-finding-{finding.id}"),
        good=good,
        bad=bad,
        commits=commits,
        lo=-1,
        hi=len(commits) - 1,
        labels={"-1": c.baseline, str(len(commits) - 1): c.candidate},
        skipped=[],
        status="measuring",
        current={"kind": "ends", "labels": [c.baseline, c.candidate], "sweeps": []},
        steps=[],
        updated_at=utcnow(),
    )
    session.add(b)
    session.flush()
    finding.comparison = {**(finding.comparison or {}), "bisection_id": b.id}
    c.verdicts = {**(c.verdicts or {}), KEY: {"id": b.id}}
    return f"bisection {b.id} started on {b.host}: {len(commits)} commits after {c.baseline} up to {c.candidate}"


# ----------------------------------------------------------------------------------------------- steps


def _label_of(commit: dict) -> set[str]:
    """The version labels a build of ``commit`` can have (``worker.builds.source.Revision.label``)."""
    return {f"b{commit['number']}", f"b{commit['number']}+{commit['sha'][:7]}"}


def _step_no(b: Bisection) -> int:
    return len(b.steps or []) + 1


def _look_spec(b: Bisection, labels: list[str], look: int) -> tuple[str, SweepSpec]:
    sid = f"bisection-{b.id}-step{_step_no(b)}-look{look}"
    processes = LOOKS[look - 1] - (LOOKS[look - 2] if look > 1 else 0)
    return sid, step_spec(b.suite, labels, processes, sid, hosts=[b.host], placement="each")


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
        sent = datetime.fromisoformat(cur["sent"])
        if sent.tzinfo is None:
            sent = sent.replace(tzinfo=timezone.utc)
        if utcnow() - sent > timedelta(seconds=PREPARE_TIMEOUT_S):
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


def _comparison(d) -> dict | None:
    return d.comparison.as_dict() if d.comparison else None


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
                "against_good": _comparison(d),
                "against_bad": None,
                "sweeps": sweeps,
            },
        ]
        b.effect = _comparison(d)
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
            "against_good": _comparison(d1),
            "against_bad": _comparison(d2),
            "sweeps": sweeps,
        },
    ]
    if verdict is None:
        return _finish(b, "undecided", f"{labels[1]} undecided at the last look")
    if verdict == BAD:
        b.hi, b.effect = mid, _comparison(d1)
    else:
        b.lo, b.effect = mid, _comparison(d2)
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
    c = session.get(Campaign, b.campaign_id)
    w = session.get(Watch, c.watch) if c is not None else None
    return dict(w.spec or {}) if w is not None else {}


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
    try:
        fleet.submit_once(database_url, broker_url, step.spec, step.sweep_id)
    except UserError as exc:  # the host went away, the model changed: say so, stop
        with session_scope(database_url) as s:
            b = s.get(Bisection, bisection_id, with_for_update=True)
            _fail(b, f"could not enqueue {step.sweep_id}: {exc}")
            announce(s, b, _doc(s, b))
        return f"failed: could not enqueue {step.sweep_id}: {exc.message}"
    with session_scope(database_url) as s:
        _record(s.get(Bisection, bisection_id, with_for_update=True), step.sweep_id)
    return step.message


def advance_all(database_url: str, broker_url: str) -> dict[int, str]:
    """One step of every active bisection, oldest first; one's error is its line, not the others' end."""
    with session_scope(database_url) as s:
        ids = list(s.scalars(select(Bisection.id).where(Bisection.status.in_(ACTIVE)).order_by(Bisection.id)))
    out = {}
    for bid in ids:
        try:
            out[bid] = advance(database_url, broker_url, bid)
        except Exception as exc:  # logged with its traceback; the next tick tries again
            log.exception("bisection %s: step failed", bid)
            out[bid] = f"error: {type(exc).__name__}: {exc}"
    return out


# ----------------------------------------------------------------------------------------------- reading


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
