"""What a worker does with one job message, as a plain function that runs without a broker.

claim in PostgreSQL -> run in a fresh child process while renewing the lease -> write the result
once (or keep it on disk if the database is away) -> ack. A duplicate or stale message does no work.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sqlalchemy.exc import OperationalError

from siliconbench.errors import UserError
from siliconbench.queues import LEASE_S

from .child import run_job
from .spool import Spool

log = logging.getLogger(__name__)
JOB_ID = re.compile(r"^[0-9a-f]{16}$")
# How long a claim waits for an unreachable database before giving the message back.
CLAIM_PATIENCE_S = 300


@dataclass
class WorkerContext:
    name: str
    database_url: str
    models_dir: Path
    spool: Spool
    hostname: str = ""
    requeue: Callable[[str], None] | None = None  # sends a fresh message for a job id (crash retry)
    current_job: str | None = None  # what the heartbeat reports as running now


def _with_db(url: str, fn, patience_s: float = CLAIM_PATIENCE_S):
    """fn(session) in one transaction, retried while the database is unreachable (the message waits)."""
    from coordinator.database import session_scope

    deadline = time.monotonic() + patience_s
    delay = 0.5
    while True:
        try:
            with session_scope(url) as s:
                return fn(s)
        except (OperationalError, UserError) as exc:
            if time.monotonic() > deadline:
                raise
            log.warning("database unreachable (%s); retrying in %.1f s", str(exc).splitlines()[0][:120], delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


class LeaseKeeper(threading.Thread):
    def __init__(self, ctx: WorkerContext, job_id: str):
        super().__init__(daemon=True, name="siliconbench-lease")
        self.ctx, self.job_id, self.stopped = ctx, job_id, threading.Event()

    def run(self) -> None:
        from coordinator.database import session_scope
        from coordinator.jobstate import renew

        while not self.stopped.wait(LEASE_S / 3):
            try:
                with session_scope(self.ctx.database_url) as s:
                    if not renew(s, self.job_id, worker=self.ctx.name):
                        log.warning("lost the lease of job %s", self.job_id)
            except Exception as exc:  # the job keeps running; its result is spooled if need be
                log.warning("could not renew the lease of %s: %s", self.job_id, exc)


def _execute(job, ctx: WorkerContext):
    """The job's result: from a fresh child process, or at once for the plumbing benchmark's noop."""
    from siliconbench.results import JobResult, JobStatus, failed

    if job.workload == "noop":  # every step of a job except the engine (benchmarks/plumbing.py)
        return JobResult(job_id=job.job_id, status=JobStatus.ok)
    if not (ctx.models_dir / job.artifact).resolve().is_relative_to(ctx.models_dir.resolve()):
        return failed(job.job_id, f"artifact path {job.artifact!r} resolves outside the models folder")
    from .envs import python_for

    # A job naming an engine version runs under that engine environment's interpreter.
    return run_job(job, ctx.models_dir, python=python_for(job.engine, job.engine_version) if job.engine_version else None)


def handle_job(job_id: object, ctx: WorkerContext) -> str:
    """Process one job message; returns what happened (for logs and tests).

    Two transactions per job, the claim and the result, so bookkeeping stays a small part of a short
    job; the host's current job is published by the heartbeat from ``ctx.current_job``.
    """
    from coordinator.database import session_scope
    from coordinator.jobstate import attempts_left, claim, requeue
    from coordinator.store import save_result

    if not isinstance(job_id, str) or not JOB_ID.match(job_id):
        log.error("refused a malformed job message: %r", job_id)
        return "refused: malformed message"
    if ctx.spool.pending():
        try:
            ctx.spool.flush(ctx.database_url)
        except Exception as exc:
            log.warning("spool not flushed yet: %s", exc)
    host = ctx.hostname or ctx.name

    c = _with_db(ctx.database_url, lambda s: claim(s, job_id, worker=ctx.name, host=host))
    if c.job is None:
        log.info("job %s: no work to do (%s)", job_id, c.refused)
        return f"refused: {c.refused}"
    job = c.job
    log.info("job %s attempt %d: %s", job_id, c.attempt, job.label())
    lease = LeaseKeeper(ctx, job_id)
    lease.start()
    ctx.current_job = job_id
    try:
        result = _execute(job, ctx)
    finally:
        lease.stopped.set()
        ctx.current_job = None
    crashed = result.status == "failed" and (result.error or "").startswith("crash")
    if crashed and attempts_left(c.attempt) and ctx.requeue is not None:
        if _with_db(ctx.database_url, lambda s: requeue(s, job_id, result.error)):
            ctx.requeue(job_id)
            log.warning("job %s crashed (%s); re-enqueued for attempt %d", job_id, result.error, c.attempt + 1)
            return "requeued"
    try:
        with session_scope(ctx.database_url) as s:
            written = save_result(s, job, result, host=host, worker=ctx.name)
    except (OperationalError, UserError):
        ctx.spool.put(job, result, host=host, worker=ctx.name)
        return "spooled"
    return result.status.value if written else "duplicate"
