"""Nothing left half-done by a restart: embedded sweeps whose process stopped before their end.

An embedded sweep (the dashboard's background runner, `siliconbench run`) records its owner, this host and
process. A sweep still queued or running whose owner process is gone is orphaned: no one will finish its
jobs. The next dashboard or `siliconbench run` to start on the same host (only it can tell a live pid from a
dead one) applies the sweep's ``on_interrupt``: ``fail`` stores each unfinished job as failed with the reason,
``rerun`` puts them back to queued and hands them to the caller to run again, under the caller's ownership.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import psutil
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.results import failed
from siliconbench.contract.spec import SweepSpec

from siliconbench.storage import result_store, sweep_store
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import Job, Sweep
from siliconbench.worker.platform.host_facts import host_facts

from .run import owner_tag

OWNER = re.compile(r"^embedded (?P<host>\S+) pid (?P<pid>\d+) at (?P<created>[\d.]+)$")


@dataclass
class Interrupted:
    sweep_id: str
    owner: str
    policy: str
    jobs: list[JobSpec]  # unfinished, in run order: failed ("fail") or queued again ("rerun")
    spec: SweepSpec


def alive(owner: str) -> bool:
    m = OWNER.match(owner or "")
    if not m:
        return True  # not an embedded owner we can judge: leave it alone
    try:
        return abs(psutil.Process(int(m["pid"])).create_time() - float(m["created"])) < 0.5
    except psutil.NoSuchProcess:
        return False


def orphaned(session: Session, hostname: str) -> list[Sweep]:
    rows = session.scalars(
        select(Sweep).where(Sweep.status.in_(("queued", "running")), Sweep.owner.like(f"embedded {hostname} pid %"))
    ).all()
    return [s for s in rows if not alive(s.owner)]


def recover(database_url: str) -> list[Interrupted]:
    """Apply on_interrupt to every orphaned embedded sweep of this host; the ``rerun`` ones come back with
    their jobs queued again and owned by this process, for the caller to run (``run.run_jobs``)."""
    out = []
    with session_scope(database_url) as s:
        for sweep in orphaned(s, host_facts()["hostname"]):
            spec = SweepSpec.model_validate(sweep.spec)
            jobs = unfinished(s, sweep.id)
            if spec.on_interrupt == "rerun":
                s.execute(
                    update(Job)
                    .where(Job.sweep_id == sweep.id, Job.status == "running")
                    .values(status="queued", error=f"interrupted: {sweep.owner} stopped")
                )
                sweep_store.set_owner(s, sweep.id, owner_tag())
            else:
                reason = (
                    f"interrupted: the process that ran this embedded sweep ({sweep.owner}) stopped before "
                    "this job finished (on_interrupt: fail; use on_interrupt: rerun to run it again)"
                )
                fail_unfinished(s, sweep.id, reason)
            out.append(Interrupted(sweep.id, sweep.owner, spec.on_interrupt, jobs, spec))
    return out


def unfinished(session: Session, sweep_id: str) -> list[JobSpec]:
    """The sweep's jobs still queued or running, in run order."""
    rows = session.scalars(
        select(Job.spec).where(Job.sweep_id == sweep_id, Job.status.in_(("queued", "running"))).order_by(Job.idx)
    ).all()
    return [JobSpec.model_validate(r) for r in rows]


def fail_unfinished(session: Session, sweep_id: str, reason: str) -> None:
    """Store each unfinished job of the sweep as failed with ``reason``; the sweep is then done."""
    for job in unfinished(session, sweep_id):
        result_store.save_result(session, job, failed(job.job_id, reason))
    sweep_store.refresh_sweep_status(session, sweep_id)
