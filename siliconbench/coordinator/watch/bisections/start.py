"""A campaign's end starts a bisection: the regression to search, the commits between the two tags, the host."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.watch_spec import LLAMA_CPP

from siliconbench.coordinator.bisection import record
from siliconbench.coordinator.bisection.sweeps import MEASURED, THROUGH, measured_through, series_sweep
from siliconbench.coordinator.stats.significance import DEFAULT_MIN_EFFECT
from siliconbench.coordinator.watch import llama_tags
from siliconbench.storage import result_store
from siliconbench.storage.tables import Finding, Job
from siliconbench.storage.watch_tables import Bisection, Campaign

KEY = "bisection"  # in a campaign's verdicts: {"id": ...} or {"reason": why none was started}


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
    b = record.begin(
        session,
        source=llama["source"],
        good=good,
        bad=bad,
        commits=commits,
        metric=metric,
        min_effect=DEFAULT_MIN_EFFECT,
        suite=series_sweep(job, f"bisection-of-finding-{finding.id}"),
        host=v["changed_hosts"][0],
        runner=record.FLEET,
        labels={"-1": c.baseline, str(len(commits) - 1): c.candidate},
        campaign_id=c.id,
        finding_id=finding.id,
        options={"through": THROUGH},
        finding_through=_through(session, finding),
    )
    finding.comparison = {**(finding.comparison or {}), "bisection_id": b.id}
    c.verdicts = {**(c.verdicts or {}), KEY: {"id": b.id}}
    return f"bisection {b.id} started on {b.host}: {len(commits)} commits after {c.baseline} up to {c.candidate}"


def _through(session: Session, finding: Finding) -> str:
    """How the finding's candidate side was measured: a build's llama-bench, else the binding."""
    stored = result_store.load_stored(session, job_ids=[finding.after_job_id])
    return measured_through(stored[0].result) if stored else "binding"
