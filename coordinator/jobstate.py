"""Job state in PostgreSQL, the source of truth: claims with renewable leases, and their ends.

Celery over Redis delivers at least once and sometimes twice; these transitions make that harmless:
a worker may only run a job it claimed, a claim succeeds only for a queued job or one whose lease
expired, and the result is written once (store.save_result). A job is failed with its reason once
it has been claimed MAX_ATTEMPTS times.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from siliconbench.jobs import JobSpec
from siliconbench.queues import LEASE_S, MAX_ATTEMPTS
from siliconbench.results import failed

from . import store
from .models import Job, utcnow


@dataclass
class Claim:
    job: JobSpec | None
    attempt: int = 0
    refused: str | None = None  # why no work is to be done (duplicate, done, cancelled, gave up)


def claim(session: Session, job_id: str, *, worker: str, host: str, lease_s: float = LEASE_S) -> Claim:
    """Take the job for ``worker`` if it is queued or its lease expired; otherwise say why not.

    The common case is one UPDATE ... RETURNING; only a refused claim reads the row to say why.
    """
    now = utcnow()
    claimable = or_(Job.status == "queued", and_(Job.status == "running", Job.lease_expires_at < now))
    mine = or_(Job.target_host.is_(None), Job.target_host == worker)
    got = session.execute(
        update(Job).where(Job.id == job_id, claimable, mine, Job.attempts < MAX_ATTEMPTS)
        .values(status="running", worker=worker, host=host, attempts=Job.attempts + 1, started_at=now,
                lease_expires_at=now + timedelta(seconds=lease_s))
        .returning(Job.spec, Job.attempts)).first()
    if got is not None:
        return Claim(JobSpec.model_validate(got.spec), attempt=got.attempts)
    return _refusal(session, job_id, worker=worker, host=host, claimable=claimable)


def _refusal(session: Session, job_id: str, *, worker: str, host: str, claimable) -> Claim:
    row = session.execute(select(Job.status, Job.attempts, Job.worker, Job.target_host, Job.error, Job.spec)
                          .where(Job.id == job_id)).first()
    if row is None:
        return Claim(None, refused=f"unknown job {job_id}")
    if row.target_host and row.target_host != worker:
        return Claim(None, refused=f"job is pinned to {row.target_host}")
    if row.attempts >= MAX_ATTEMPTS:
        # Out of attempts and still claimable: record the failure once (the UPDATE is the lock).
        if session.execute(update(Job).where(Job.id == job_id, claimable).values(status="running")).rowcount == 1:
            reason = f"gave up after {row.attempts} attempts" + (f"; last: {row.error}" if row.error else "")
            store.save_result(session, JobSpec.model_validate(row.spec), failed(job_id, reason), host=host, worker=worker)
            return Claim(None, refused=reason)
    return Claim(None, refused=f"job is {row.status}" + (f" on {row.worker}" if row.worker else ""))


def renew(session: Session, job_id: str, *, worker: str, lease_s: float = LEASE_S) -> bool:
    """Extend our lease; False if the job is no longer ours (the reconciler took it back)."""
    res = session.execute(update(Job).where(Job.id == job_id, Job.worker == worker, Job.status == "running")
                          .values(lease_expires_at=utcnow() + timedelta(seconds=lease_s)))
    return res.rowcount == 1


def requeue(session: Session, job_id: str, reason: str) -> bool:
    """Put a running job back to queued (a crash worth another attempt); the caller re-enqueues it."""
    res = session.execute(update(Job).where(Job.id == job_id, Job.status == "running")
                          .values(status="queued", lease_expires_at=None, error=reason, enqueued_at=utcnow()))
    return res.rowcount == 1


def mark_enqueued(session: Session, job_ids: list[str], queues: dict[str, str]) -> None:
    now = utcnow()
    session.execute(update(Job), [{"id": j, "queue": queues[j], "enqueued_at": now} for j in job_ids])


def attempts_left(attempt: int) -> bool:
    return attempt < MAX_ATTEMPTS
