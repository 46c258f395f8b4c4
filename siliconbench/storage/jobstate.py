"""Job state in PostgreSQL, the source of truth: claims with renewable leases, and their ends.

Celery over Redis delivers at least once and sometimes twice; these transitions make that harmless:
a worker may only run a job it claimed, a claim succeeds only for a queued job or one whose lease
expired, and the result is written once (result_store.save_result). A job is failed with its reason once
MAX_ATTEMPTS of its own attempts failed (a crash, retried), or once its worker was lost under it
MAX_INTERRUPTIONS times (a lease that expired: the worker died or lost the database, which is not the
job's failure unless it keeps happening). Every attempt that ended without the result is a job_attempts
row with its cause.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import String, and_, any_, bindparam, func, or_, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.queues import LEASE_S, MAX_ATTEMPTS, MAX_INTERRUPTIONS
from siliconbench.contract.results import failed

from . import result_store
from .tables import Job, JobAttempt, utcnow


@dataclass
class Claim:
    job: JobSpec | None
    attempt: int = 0  # the job's own attempt number: claims less interruptions
    refused: str | None = None  # why no work is to be done (duplicate, done, cancelled, gave up)


def claim(session: Session, job_id: str, *, worker: str, host: str, lease_s: float = LEASE_S) -> Claim:
    """Take the job for ``worker`` if it is queued or its lease expired; otherwise say why not.

    The common case is one UPDATE ... RETURNING; only a refused claim reads the row to say why.
    """
    got = try_claim(session, job_id, worker=worker, host=host, lease_s=lease_s)
    if got is not None:
        return got
    return _refusal(session, job_id, worker=worker, host=host, claimable=_claimable(utcnow()))


def _claimable(now):
    return or_(Job.status == "queued", and_(Job.status == "running", Job.lease_expires_at < now))


_JOBS = Job.__table__


def _claim_statement():
    c = _JOBS.c
    now = bindparam("now", type_=c.started_at.type)
    claimable = or_(c.status == "queued", and_(c.status == "running", c.lease_expires_at < now))
    mine = or_(c.target_host.is_(None), c.target_host == bindparam("worker"))
    left = and_(c.attempts - c.interruptions < MAX_ATTEMPTS, c.interruptions < MAX_INTERRUPTIONS)
    return (
        update(_JOBS)
        .where(c.id == bindparam("job_id"), claimable, mine, left)
        .values(
            status="running",
            worker=bindparam("worker"),
            host=bindparam("host"),
            attempts=c.attempts + 1,
            started_at=now,
            lease_expires_at=bindparam("expires", type_=c.lease_expires_at.type),
        )
        .returning(c.spec, c.attempts, c.interruptions)
    )


_CLAIM = _claim_statement()  # built once: a claim costs its round trip, not statement construction
# PostgreSQL, autocommitted: the same UPDATE, whose transaction (this statement alone) commits without waiting
# for the WAL flush (set_config(..., true) is transaction-local, so the connection's later writes stay synchronous).
_CLAIM_ASYNC = _claim_statement().returning(func.set_config("synchronous_commit", "off", True))
_PER_CLAIM = ("job_id", "worker", "host", "now", "expires")


def postgres_text(stmt, per_call: tuple[str, ...] = _PER_CLAIM) -> tuple[str, dict]:
    """The statement as psycopg's SQL text (pyformat), and the values of its own literals (the parameters other
    than ``per_call``): rendered once from one definition, so the worker's hot path (run on the bare psycopg
    connection, prepared) and the Session's path cannot drift apart."""
    from sqlalchemy.dialects.postgresql import psycopg

    compiled = stmt.compile(dialect=psycopg.dialect())
    literals = compiled.construct_params(dict.fromkeys(per_call))
    return compiled.string, {k: v for k, v in literals.items() if k not in per_call}


CLAIM_ASYNC_SQL, _CLAIM_ASYNC_LITERALS = postgres_text(_CLAIM_ASYNC)


def try_claim_async_with(execute, job_id: str, *, worker: str, host: str, lease_s: float = LEASE_S) -> Claim | None:
    """try_claim(durable=False) through ``execute(sql, params) -> first row or None``: a Session's connection
    (result_store.session_executor), or the worker's held connection (autocommitted, prepared: siliconbench.storage.hot_path)."""
    now = utcnow()
    return _claimed(
        execute(
            CLAIM_ASYNC_SQL,
            dict(
                _CLAIM_ASYNC_LITERALS,
                job_id=job_id,
                worker=worker,
                host=host,
                now=now,
                expires=now + timedelta(seconds=lease_s),
            ),
        )
    )


def _claimed(row) -> Claim | None:
    """The Claim of a claim statement's returned row (spec, attempts, interruptions, ...); None: refused."""
    if row is None:
        return None
    spec, attempts, interruptions = row[0], row[1], row[2]
    return Claim(JobSpec.model_validate(spec), attempt=attempts - interruptions)


def try_claim(
    session: Session, job_id: str, *, worker: str, host: str, lease_s: float = LEASE_S, durable: bool = True
) -> Claim | None:
    """The claim's one statement: the Claim if it took, None if refused (then ``claim`` says why).

    A single UPDATE, atomic on its own: a worker may run it outside an explicit transaction (autocommit),
    which saves the BEGIN and COMMIT round trips. ``durable=False`` (PostgreSQL, autocommit only) commits it
    asynchronously (CLAIM_ASYNC_SQL, the text the worker's held connection runs prepared): visible to
    everyone at once, but the fsync (1.5-3 ms here, half a no-op job's bookkeeping) is not waited for.
    Losing such a claim in a server crash loses no result and doubles none:

    - the worker's result write is synchronous and comes after the claim in the one WAL; its flush covers
      every earlier record, so a result that is durable has a durable claim;
    - a crash before the result write rolls the job back to what it was before the claim (queued, or
      running on an expired lease). The result write is then refused for a worker login (row-level security:
      the job is not its own, unless it held it last, when the write is that job's only result), or taken at
      most once for the owner (results are keyed by job id, ON CONFLICT DO NOTHING); a job left without its
      result is queued with no message (acked), or has an expired lease, and the reconciler re-sends it;
    - a duplicate message refused meanwhile on the strength of the lost claim is the same case;
    - the result of a sub-second job commits the same way (SILICONBENCH_DURABLE_AFTER_S). A crash that loses it
      leaves the job running on the worker's lease (its claim flushed) or as before the claim (not flushed
      either), its message acked; the reconciler sends it again either way, and it is run once more.
    A lost claim only loses its attempt count, and a server crash is not the job's failure.
    """
    if not durable:
        return try_claim_async_with(
            result_store.session_executor(session), job_id, worker=worker, host=host, lease_s=lease_s
        )
    now = utcnow()
    return _claimed(
        session.execute(
            _CLAIM, dict(job_id=job_id, worker=worker, host=host, now=now, expires=now + timedelta(seconds=lease_s))
        ).first()
    )


def _refusal(session: Session, job_id: str, *, worker: str, host: str, claimable) -> Claim:
    row = session.execute(
        select(Job.status, Job.attempts, Job.interruptions, Job.worker, Job.target_host, Job.error, Job.spec).where(
            Job.id == job_id
        )
    ).first()
    if row is None:
        return Claim(None, refused=f"unknown job {job_id}")
    if row.target_host and row.target_host != worker:
        return Claim(None, refused=f"job is pinned to {row.target_host}")
    if row.attempts - row.interruptions >= MAX_ATTEMPTS or row.interruptions >= MAX_INTERRUPTIONS:
        # Out of attempts and still claimable: record the failure once (the UPDATE is the lock).
        # Taken as ours (worker, host) first: a worker login may write the failure only of a job it holds.
        took = update(Job).where(Job.id == job_id, claimable).values(status="running", worker=worker, host=host)
        if session.execute(took).rowcount == 1:
            reason = gave_up_reason(row.attempts, row.interruptions) + (f"; last: {row.error}" if row.error else "")
            result_store.save_result(
                session, JobSpec.model_validate(row.spec), failed(job_id, reason), host=host, worker=worker
            )
            return Claim(None, refused=reason)
    return Claim(None, refused=f"job is {row.status}" + (f" on {row.worker}" if row.worker else ""))


def _renew_statement():
    # "owner", not "worker": a parameter named after a column this UPDATE does not set is taken for a SET value
    c = _JOBS.c
    return (
        update(_JOBS)
        .where(c.id == bindparam("job_id"), c.worker == bindparam("owner"), c.status == "running")
        .values(lease_expires_at=bindparam("expires", type_=c.lease_expires_at.type))
    )


_RENEW = _renew_statement()


def renew(session: Session, job_id: str, *, worker: str, lease_s: float = LEASE_S) -> bool:
    """Extend our lease; False if the job is no longer ours (the reconciler took it back)."""
    expires = utcnow() + timedelta(seconds=lease_s)
    return session.execute(_RENEW, {"job_id": job_id, "owner": worker, "expires": expires}).rowcount == 1


# The same renewal as one autocommitted statement on the worker's held connection (siliconbench.storage.hot_path), not
# waiting for its WAL flush: a renewal lost in a database crash leaves the lease shorter, and the next one, LEASE_S / 3
# later, extends it again.
_RENEW_ASYNC = _renew_statement().returning(_JOBS.c.id, func.set_config("synchronous_commit", "off", True))
RENEW_ASYNC_SQL, _RENEW_ASYNC_LITERALS = postgres_text(_RENEW_ASYNC, ("job_id", "owner", "expires"))


def renew_with(execute, job_id: str, *, worker: str, lease_s: float = LEASE_S) -> bool:
    """renew through ``execute(sql, params) -> first row or None`` (the worker's held connection)."""
    expires = utcnow() + timedelta(seconds=lease_s)
    return (
        execute(RENEW_ASYNC_SQL, dict(_RENEW_ASYNC_LITERALS, job_id=job_id, owner=worker, expires=expires)) is not None
    )


def gave_up_reason(attempts: int, interruptions: int) -> str:
    own = attempts - interruptions
    if interruptions >= MAX_INTERRUPTIONS:
        return (
            f"gave up: its worker was lost {interruptions} times while running it (a job that takes its "
            f"worker down?), after {own} attempt(s) of its own"
        )
    return f"gave up after {own} attempts" + (
        f" ({interruptions} more interrupted by a lost worker)" if interruptions else ""
    )


def end_attempt(session: Session, job_id: str, cause: str) -> None:
    """Record how the job's current claim ended (before it is requeued or failed); once per claim."""
    row = session.execute(select(Job.attempts, Job.worker, Job.host, Job.started_at).where(Job.id == job_id)).first()
    if row is None or row.attempts == 0:
        return
    if session.get(JobAttempt, (job_id, row.attempts)) is None:
        session.add(
            JobAttempt(
                job_id=job_id,
                attempt=row.attempts,
                worker=row.worker,
                host=row.host,
                started_at=row.started_at,
                ended_at=utcnow(),
                cause=cause,
            )
        )
        session.flush()


def requeue(session: Session, job_id: str, reason: str) -> bool:
    """Put a running job back to queued (a crash worth another attempt); the caller re-enqueues it."""
    res = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status == "running")
        .values(status="queued", lease_expires_at=None, error=reason, enqueued_at=utcnow())
    )
    if res.rowcount == 1:
        end_attempt(session, job_id, reason)
    return res.rowcount == 1


def mark_enqueued(session: Session, job_ids: list[str], queues: dict[str, str]) -> None:
    """Record each job's queue and the enqueue time: one UPDATE per distinct queue (not one per job)."""
    now = utcnow()
    by_queue: dict[str, list[str]] = {}
    for j in job_ids:
        by_queue.setdefault(queues[j], []).append(j)
    postgres = session.get_bind().dialect.name == "postgresql"
    for queue, ids in by_queue.items():
        # PostgreSQL: the ids as one array parameter; elsewhere IN lists of bounded length.
        for chunk in (
            [ids] if postgres else [ids[i : i + result_store.CHUNK] for i in range(0, len(ids), result_store.CHUNK)]
        ):
            where = (
                _JOBS.c.id == any_(bindparam("ids", chunk, type_=ARRAY(String))) if postgres else _JOBS.c.id.in_(chunk)
            )
            session.execute(update(_JOBS).where(where).values(queue=queue, enqueued_at=now))


def attempts_left(attempt: int) -> bool:
    return attempt < MAX_ATTEMPTS
