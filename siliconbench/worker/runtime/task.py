"""What a worker does with one job message, as a plain function that runs without a broker.

claim in PostgreSQL -> run in a fresh child process while renewing the lease -> write the result
once (or keep it on disk if the database is away) -> ack. A duplicate or stale message does no work.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.exc import OperationalError, ProgrammingError

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import inside
from siliconbench.contract.queues import LEASE_S
from siliconbench.contract.results import JobResult, JobStatus, failed
from siliconbench.contract.settings import DURABLE_AFTER_S

from siliconbench.storage.database import session_scope
from siliconbench.storage.hot_path import HeldConnection
from siliconbench.storage.jobstate import attempts_left, claim, renew, requeue
from siliconbench.storage.outages import DATABASE_DOWN, call_through
from siliconbench.storage.result_store import save_result
from siliconbench.storage.roles import refused_by_rules
from siliconbench.worker.envs.venvs import python_for
from siliconbench.worker.job.perform import perform_job
from siliconbench.worker.models import fetch
from siliconbench.worker.runtime import outages
from siliconbench.worker.runtime.files import fetch_missing
from siliconbench.worker.runtime.registration import advertise_models, set_activity
from siliconbench.worker.runtime.spool import Spool

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
    current_job: str | None = None  # what the heartbeat reports as running now (and the lease keeper renews)
    lease_keeper: LeaseKeeper | None = None  # started with the first job
    held: HeldConnection | None = None  # the worker's one connection: claims, results, heartbeats, lease renewals
    # A result waits for its WAL flush (fsync: 3.5 ms on this project's VM, pg_test_fsync) before the ack only if
    # its job ran at least this long (SILICONBENCH_DURABLE_AFTER_S). A shorter job's result commits without
    # waiting, like every claim: a database crash in the next few hundred ms (wal_writer_delay) may then lose it,
    # and the reconciler runs that job again (its lease expires, or it is queued with no message), once, with the
    # claims' exactly-once argument (jobstate.try_claim). Rerunning a sub-second job costs less than the flush
    # costs every job: for a no-op the flush is more than the rest of its bookkeeping (benchmarks/plumbing.py).
    # A real benchmark job, a fresh child process that loads a model, takes longer, so its result is durable.
    durable_after_s: float = DURABLE_AFTER_S

    def __post_init__(self) -> None:
        if self.held is None:  # connects at its first statement
            self.held = HeldConnection(self.database_url)


def _with_db(url: str, fn, patience_s: float = CLAIM_PATIENCE_S):
    """fn(session) in one transaction, retried while the database is unreachable (the message waits)."""

    def once():
        with session_scope(url) as s:
            return fn(s)

    return _with_db_call(once, patience_s)


def _with_db_call(fn, patience_s: float = CLAIM_PATIENCE_S):
    """fn(), retried while the database is unreachable (the message waits); one log line each way."""
    return call_through(fn, outages.DATABASE, patience_s=patience_s, outages=DATABASE_DOWN)


class LeaseKeeper(threading.Thread):
    """One per worker, for its whole life: renews the lease of the job the worker is running now.

    Wakes every LEASE_S / 3 and renews ``ctx.current_job`` if there is one, so no thread is started
    per job; a job is renewed at most LEASE_S / 3 after its claim, as with a thread per job. A renewal
    that races the job's end is harmless: renew only touches a running job of this worker.
    """

    def __init__(self, ctx: WorkerContext):
        super().__init__(daemon=True, name="siliconbench-lease")
        self.ctx, self.stopped = ctx, threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(LEASE_S / 3):
            job_id = self.ctx.current_job
            if job_id is None:
                continue
            try:
                if not self._renew(job_id) and self.ctx.current_job == job_id:
                    log.warning("lost the lease of job %s", job_id)
                outages.DATABASE.up()
            except DATABASE_DOWN as exc:  # the job keeps running; its result is spooled if need be
                outages.DATABASE.down(exc)
            except Exception as exc:
                log.warning("could not renew the lease of %s: %s", job_id, exc)

    def _renew(self, job_id: str) -> bool:
        held = _held(self.ctx)
        if held is not None:  # the worker's one connection (storage.hot_path)
            return held.renew(job_id, worker=self.ctx.name)
        with session_scope(self.ctx.database_url) as s:
            return renew(s, job_id, worker=self.ctx.name)


def _lease_keeper(ctx: WorkerContext) -> LeaseKeeper:
    keeper = ctx.lease_keeper
    if keeper is None or not keeper.is_alive():
        keeper = ctx.lease_keeper = LeaseKeeper(ctx)
        keeper.start()
    return keeper


def _held(ctx: WorkerContext) -> HeldConnection | None:
    if ctx.held is None or ctx.held.url != ctx.database_url:
        ctx.held = HeldConnection(ctx.database_url)
    return ctx.held if ctx.held.usable() else None


def _execute(job, ctx: WorkerContext):
    """The job's result: its model fetched here if it lacks it, then `perform_job` (also the embedded run's);
    at once for the plumbing benchmark's noop."""
    if job.workload == "noop":  # every step of a job except the engine (benchmarks/plumbing.py)
        return JobResult(job_id=job.job_id, status=JobStatus.ok)
    if not inside(job.artifact):  # before a fetch writes anything under that path
        return failed(job.job_id, f"artifact path {job.artifact!r} leads outside the models folder")
    if job.fetch and not fetch.present(ctx.models_dir, job.model, job.model_sha256):
        why = _fetch(job, ctx)
        if why is not None:
            return failed(job.job_id, why)
    # A job naming an engine version runs under that engine environment's interpreter.
    python = python_for(job.engine, job.engine_version) if job.engine_version else None
    why = fetch_missing(job, ctx.database_url)  # a dataset named by digest that this machine lacks
    if why is not None:
        return failed(job.job_id, why)
    return perform_job(job, ctx.models_dir, python=python)


def _fetch(job, ctx: WorkerContext) -> str | None:
    """Fetch the job's model here before it runs (progress in hosts.activity); why it failed, or None."""
    art = job.fetch["artifact"]
    since, last, per_file = time.time(), [0.0], {}

    def report(activity: dict | None) -> None:
        try:
            set_activity(ctx.database_url, ctx.name, activity)
        except Exception as exc:  # progress is for people; the fetch goes on without it
            log.debug("could not report fetch progress: %s", exc)

    def progress(desc: str, done: int, total: int) -> None:
        per_file[desc] = done
        if time.monotonic() - last[0] >= 1.0 or done == total:
            last[0] = time.monotonic()
            report(
                {
                    "kind": "fetch",
                    "model": job.model,
                    "quant": job.quant,
                    "file": desc,
                    "done": sum(per_file.values()),
                    "total": art.get("size_bytes") or total,
                    "since": since,
                }
            )

    log.info(
        "job %s: fetching %s %s from %s", job.job_id, job.model, job.quant, (art.get("origin") or {}).get("location")
    )
    progress("starting", 0, 0)
    try:
        fetch.fetch_for_job(ctx.models_dir, job.fetch, progress)
    except UserError as exc:
        return f"preparing {job.model} {job.quant} on this host failed: {exc.message}"
    except Exception as exc:  # a broken origin is this job's failure on this host, never the worker's crash
        log.exception("fetching %s failed", job.model)
        return f"preparing {job.model} {job.quant} on this host failed: {type(exc).__name__}: {exc}"
    finally:
        report(None)
    try:
        advertise_models(ctx.database_url, ctx.name, ctx.models_dir)
    except Exception as exc:  # the model is here; placement sees it at the next registration
        log.warning("could not refresh %s's models: %s", ctx.name, exc)
    return None


def handle_job(job_id: object, ctx: WorkerContext) -> str:
    """Process one job message; returns what happened (for logs and tests).

    Two writes per job, the claim and the result, each one autocommitted statement on the worker's held
    connection (PostgreSQL), so bookkeeping stays a small part of a short job; the host's current job is
    published by the heartbeat, and its lease renewed by the worker's one LeaseKeeper, from ``ctx.current_job``.
    """
    if not isinstance(job_id, str) or not JOB_ID.match(job_id):
        log.error("refused a malformed job message: %r", job_id)
        return "refused: malformed message"
    if ctx.spool.pending():
        try:
            ctx.spool.flush(ctx.database_url)
        except DATABASE_DOWN as exc:
            outages.DATABASE.down(exc)
        except Exception as exc:
            log.warning("spool not flushed yet: %s", exc)
    host = ctx.hostname or ctx.name
    held = _held(ctx)

    def take():
        if held is not None:  # the one-statement claim on the held connection; a refusal is explained below
            got = held.claim(job_id, worker=ctx.name, host=host)
            if got is not None:
                return got
        with session_scope(ctx.database_url) as s:
            return claim(s, job_id, worker=ctx.name, host=host)

    asked = time.perf_counter()
    c = _with_db_call(take)
    claim_ms = (time.perf_counter() - asked) * 1000  # in the log line: what a fleet's load costs each claim
    if c.job is None:
        log.info("job %s: no work to do (%s)", job_id, c.refused)
        return f"refused: {c.refused}"
    job = c.job
    log.info("job %s attempt %d: %s (claimed in %.1f ms)", job_id, c.attempt, job.label(), claim_ms)
    _lease_keeper(ctx)
    ctx.current_job = job_id
    started = time.monotonic()
    try:
        result = _execute(job, ctx)
    finally:
        ctx.current_job = None
    durable = time.monotonic() - started >= ctx.durable_after_s
    crashed = result.status == "failed" and (result.error or "").startswith("crash")
    if crashed and attempts_left(c.attempt) and ctx.requeue is not None:
        if _with_db(ctx.database_url, lambda s: requeue(s, job_id, result.error)):
            ctx.requeue(job_id)
            log.warning("job %s crashed (%s); re-enqueued for attempt %d", job_id, result.error, c.attempt + 1)
            return "requeued"
    try:
        if held is not None:  # one statement (result, samples, job status), autocommitted
            written = held.save_result(job, result, host=host, worker=ctx.name, durable=durable)
        else:
            with session_scope(ctx.database_url) as s:
                written = save_result(s, job, result, host=host, worker=ctx.name)
    except (OperationalError, UserError) as exc:
        outages.DATABASE.down(exc)
        ctx.spool.put(job, result, host=host, worker=ctx.name)
        return "spooled"
    except ProgrammingError as exc:
        if not refused_by_rules(exc):
            raise
        # A worker login writes only for jobs it holds: the reconciler gave this one to another worker meanwhile.
        log.warning("job %s: result not written, the job is no longer ours (another worker holds it)", job_id)
        return "refused: no longer held"
    return result.status.value if written else "duplicate"
