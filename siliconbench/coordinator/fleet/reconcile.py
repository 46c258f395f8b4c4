"""The reconciler: put back jobs whose worker died (lease expired: an interruption, not one of the job's
attempts) or whose message vanished (Redis restarted without persistence), and fail a job with its reason
once its own attempts or its interruptions run out (siliconbench.storage.jobstate).

Safe to run anywhere and as often as wanted: re-enqueueing a job that still has a message only adds a
duplicate, which the claim refuses.
"""

from __future__ import annotations

import time
from datetime import timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.queues import MAX_INTERRUPTIONS
from siliconbench.contract.results import failed

from siliconbench.storage import broker, jobstate, result_store, sweep_store
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import Job, Sweep, utcnow

# A freshly enqueued message may not be visible to LRANGE yet when a worker has just taken it.
MESSAGE_GRACE_S = 15
# A queued job's message reserved by a worker longer ago than this is taken for lost: its worker died before
# the claim (benchmarks/faults.py found two such jobs stuck behind the 6.5 h visibility timeout). A live
# worker whose claim waits out a database outage only gets a second message, which its claim refuses.
RESERVED_GRACE_S = 60


def reconcile(
    database_url: str, broker_url: str, *, grace_s: float = MESSAGE_GRACE_S, reserved_grace_s: float = RESERVED_GRACE_S
) -> dict[str, int]:
    """One pass; the jobs it puts back are committed as queued before their new messages are sent."""
    with session_scope(database_url) as session:
        counts, to_send = _collect(session, broker_url, grace_s, reserved_grace_s)
    if to_send:
        broker.enqueue(broker_url, to_send)
    return counts


def _collect(
    session: Session, broker_url: str, grace_s: float, reserved_grace_s: float
) -> tuple[dict[str, int], list[tuple[str, str, str]]]:
    now = utcnow()
    counts = {"lease_expired": 0, "message_lost": 0, "gave_up": 0}
    to_send: list[tuple[str, str, str]] = []

    expired = session.execute(
        select(Job.id, Job.attempts, Job.interruptions, Job.worker, Job.queue, Job.spec).where(
            Job.status == "running", Job.lease_expires_at < now
        )
    ).all()
    for job_id, attempts, interruptions, worker, queue, spec in expired:
        # The worker is gone, not the job's fault: an interruption, not one of its attempts (jobstate).
        reason = f"interrupted: lease expired on worker {worker} (it died or lost the database)"
        res = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "running", Job.lease_expires_at < now)
            .values(
                status="queued",
                lease_expires_at=None,
                error=reason,
                enqueued_at=now,
                interruptions=Job.interruptions + 1,
            )
        )
        if res.rowcount != 1:
            continue  # renewed or finished meanwhile
        jobstate.end_attempt(session, job_id, reason)
        if interruptions + 1 >= MAX_INTERRUPTIONS:
            why = jobstate.gave_up_reason(attempts, interruptions + 1)
            result_store.save_result(session, JobSpec.model_validate(spec), failed(job_id, f"{why}; last: {reason}"))
            counts["gave_up"] += 1
            continue
        to_send.append((job_id, queue, f"r{time.time_ns()}"))
        counts["lease_expired"] += 1

    stale = session.execute(
        select(Job.id, Job.queue).where(
            Job.status == "queued", Job.queue.is_not(None), Job.enqueued_at < now - timedelta(seconds=grace_s)
        )
    ).all()
    if stale:
        waiting = broker.waiting_job_ids(broker_url, [q for _, q in stale], reserved_within_s=reserved_grace_s)
        for job_id, queue in stale:
            if job_id not in waiting:
                to_send.append((job_id, queue, f"r{time.time_ns()}"))
                session.execute(update(Job).where(Job.id == job_id).values(enqueued_at=now))
                counts["message_lost"] += 1
    # Sweeps whose last job just ended: workers write results, not sweep statuses.
    for (sweep_id,) in session.execute(select(Sweep.id).where(Sweep.status.in_(("queued", "running")))).all():
        sweep_store.refresh_sweep_status(session, sweep_id)
    return counts, to_send
