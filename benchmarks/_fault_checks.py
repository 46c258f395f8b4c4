"""What benchmarks/faults.py checks after its campaign: the sweep's jobs in PostgreSQL (lost, duplicated,
incomplete, failed) and whether the workers, the reconciler and the dashboard still serve.

Every check reads the database directly (not through the campaign's TCP cut) and does real work: a probe job
on each worker, a lost message the reconciler must resend, the dashboard's health endpoint and page.
"""

from __future__ import annotations

import os
import signal
from datetime import timedelta
from pathlib import Path

import redis
from sqlalchemy import func, select, update

from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.spec import parse_sweep

from harness.fleet import wait_for
from siliconbench.coordinator.fleet import sweeps as fleet
from siliconbench.storage import sweep_store
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import Job, Result, SampleRow, utcnow

from ._fleet import get

REPETITIONS = 3
FAULTS = ("kill worker", "kill broker", "kill reconciler", "cut database")
FINAL = ("ok", "failed")
GHOST_QUEUE = "host.faults-ghost"  # no worker consumes it: only the reconciler puts a message there


def count_jobs(url: str, sweep_id: str) -> int:
    with session_scope(url) as s:
        return s.scalar(select(func.count()).select_from(Job).where(Job.sweep_id == sweep_id))


def done_and_pending(url: str, sweep_id: str) -> tuple[int, int]:
    with session_scope(url) as s:
        counts = dict(
            s.execute(select(Job.status, func.count()).where(Job.sweep_id == sweep_id).group_by(Job.status)).all()
        )
    return sum(counts.get(k, 0) for k in FINAL), counts.get("queued", 0) + counts.get("running", 0)


def audit(url: str, sweep_id: str) -> dict:
    with session_scope(url) as s:
        of_sweep = Job.sweep_id == sweep_id
        rows = s.execute(
            select(Job.id, Job.status, Job.attempts, Job.interruptions, Result.status, Result.error)
            .outerjoin(Result, Result.job_id == Job.id)
            .where(of_sweep)
        ).all()
        two_results = s.scalars(
            select(Result.job_id)
            .join(Job, Job.id == Result.job_id)
            .where(of_sweep)
            .group_by(Result.job_id)
            .having(func.count() > 1)
        ).all()
        twice = s.scalars(
            select(SampleRow.job_id)
            .join(Job, Job.id == SampleRow.job_id)
            .where(of_sweep)
            .group_by(SampleRow.job_id, SampleRow.repetition, SampleRow.warmup, SampleRow.metric)
            .having(func.count() > 1)
        ).all()
        reps = dict(
            s.execute(
                select(SampleRow.job_id, func.count(SampleRow.repetition.distinct()))
                .join(Job, Job.id == SampleRow.job_id)
                .where(of_sweep, SampleRow.metric == "decode_tps", SampleRow.warmup.is_(False))
                .group_by(SampleRow.job_id)
            ).all()
        )
    lost = [f"{j} ({st})" for j, st, _, _, rst, _ in rows if st not in FINAL or rst is None]
    ok = [j for j, st, _, _, rst, _ in rows if st == "ok" and rst == "ok"]
    return dict(
        jobs=len(rows),
        ok=len(ok),
        lost=lost,
        duplicated=sorted(set(two_results) | set(twice)),
        incomplete=[j for j in ok if reps.get(j, 0) != REPETITIONS],
        failed=[(err or "")[:120] for _, st, _, _, rst, err in rows if rst == "failed"],
        rerun=sum(1 for _, _, attempts, *_ in rows if attempts > 1),
        interruptions=sum(r[3] for r in rows),
    )


def _probe_workers(url: str, broker_url: str, slots) -> bool | str:
    pids = {s.name: s.proc.pid for s in slots}
    spec = parse_sweep(
        {
            "name": "faults-probe",
            "models": ["tiny-llama-5m"],
            "engines": ["llama.cpp"],
            "hosts": "all",
            "placement": "each",
            "repetitions": 1,
            "warmup": 0,
            "workloads": [{"kind": "generate", "prompt_tokens": [16], "gen_tokens": [4]}],
        }
    )

    def submit():
        try:
            return fleet.submit_sweep(spec, database_url=url, broker_url=broker_url)[0]
        except UserError:  # a worker back from its last kill may not have beaten its heart yet
            return None

    sid = wait_for(submit, 60, every_s=2, what="both workers online")
    wait_for(lambda: done_and_pending(url, sid) == (2, 0), 120, every_s=1, what="the probe jobs")
    with session_scope(url) as s:
        ran = sorted(s.execute(select(Job.worker, Job.status).where(Job.sweep_id == sid)).all())
    if ran != [(s.name, "ok") for s in slots]:
        return f"probe jobs: {ran}"
    same = all(s.proc.alive() and s.proc.pid == pids[s.name] for s in slots)
    return True if same else "a worker died during the probe"


def _probe_reconciler(url: str, broker_url: str, models_dir: Path, slot) -> bool | str:
    spec = parse_sweep(
        {
            "name": "faults-ghost",
            "models": ["tiny-llama-5m"],
            "engines": ["llama.cpp"],
            "repetitions": 1,
            "workloads": [{"kind": "generate", "prompt_tokens": [16], "gen_tokens": [4]}],
        }
    )
    job = expand(spec, ModelCatalog(models_dir))[0]
    with session_scope(url) as s:
        sweep_store.create_sweep(s, job.sweep_id, spec, [job])
        s.execute(
            update(Job)
            .where(Job.id == job.job_id)
            .values(status="queued", queue=GHOST_QUEUE, enqueued_at=utcnow() - timedelta(minutes=5))
        )
    r = redis.Redis.from_url(broker_url)
    pid = slot.proc.pid
    try:
        wait_for(lambda: r.llen(GHOST_QUEUE) > 0, 45, every_s=0.5, what="the reconciler to resend a lost message")
    finally:
        with session_scope(url) as s:
            fleet.cancel(s, job.sweep_id, broker_url)
    return True if slot.proc.alive() and slot.proc.pid == pid else "the reconciler died during the probe"


def _probe_dashboard(dash, base: str) -> bool | str:
    health, page = get(f"{base}/_stcore/health"), get(f"{base}/")
    if not dash.alive():
        return f"exited with {dash.proc.returncode}"
    if health != (200, "ok"):
        return f"health: {health}"
    return True if page[0] == 200 and "<html" in page[1].lower() else f"page: {page[0]} {page[1][:80]}"


def serving(url: str, broker_url: str, models_dir: Path, workers, reconciler, dash, dash_url: str) -> dict:
    """Each service: True, or what went wrong."""
    probes = {
        "workers": lambda: _probe_workers(url, broker_url, workers),
        "reconciler": lambda: _probe_reconciler(url, broker_url, models_dir, reconciler),
        "dashboard": lambda: _probe_dashboard(dash, dash_url),
    }
    out = {}
    for name, probe in probes.items():
        try:
            out[name] = probe()
        except AssertionError as exc:  # wait_for's timeout
            out[name] = str(exc)
    return out


def passed(f: dict) -> bool:
    clean = not (f["lost"] or f["duplicated"] or f["incomplete"] or f["left_behind"] or f["died_by_themselves"])
    return clean and f["sweep_finished"] and all(v is True for v in f["serving"].values())


def kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
