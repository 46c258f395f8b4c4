"""Attempts that mean something: a lost worker (expired lease) is an interruption, not one of the job's
attempts, up to its own bound; each attempt's end is recorded with its cause. Real PostgreSQL and Redis,
the real claim statement and reconciler."""

from __future__ import annotations

import pytest
import redis
from sqlalchemy import update

from siliconbench.contract.queues import MAX_ATTEMPTS, MAX_INTERRUPTIONS

from siliconbench.coordinator.fleet.reconcile import reconcile
from siliconbench.coordinator.reads import queries
from siliconbench.storage import database as db, jobstate, result_store, sweep_store
from siliconbench.storage.tables import Job, utcnow
from tests.conftest import new_pg_database
from tests.storage.records import JOBS, SPEC, SWEEP_ID

BROKER = "redis://127.0.0.1:6379/6"


def _claim(url: str, job_id: str):
    with db.session_scope(url) as s:
        return jobstate.claim(s, job_id, worker="mac-a", host="mac-a.local")


def _worker_dies(url: str, job_id: str) -> dict:
    with db.session_scope(url) as s:  # its lease runs out: nobody renews it
        s.execute(update(Job).where(Job.id == job_id).values(lease_expires_at=utcnow()))
    return reconcile(url, BROKER, grace_s=3600)


def _job(url: str, job_id: str) -> Job:
    with db.session_scope(url) as s:
        return s.get(Job, job_id)


@pytest.fixture
def url():
    with new_pg_database("sb_attempts", migrated=True) as u:
        yield u


def test_lost_workers_do_not_use_up_the_jobs_attempts(url):
    redis.Redis.from_url(BROKER).flushdb()
    job = JOBS[0]
    with db.session_scope(url) as s:
        sweep_store.create_sweep(s, SWEEP_ID, SPEC, [job])
        s.execute(update(Job).where(Job.id == job.job_id).values(queue="host.mac-a"))  # as fleet.submit_sweep sends it
    for i in range(MAX_ATTEMPTS + 2):  # more lost workers than the job has attempts
        c = _claim(url, job.job_id)
        assert c.job is not None and c.attempt == 1, (i, c.refused)
        assert _worker_dies(url, job.job_id)["lease_expired"] == 1
    j = _job(url, job.job_id)
    assert (j.status, j.attempts, j.interruptions) == ("queued", MAX_ATTEMPTS + 2, MAX_ATTEMPTS + 2)

    c = _claim(url, job.job_id)  # the job's own crash counts
    with db.session_scope(url) as s:
        assert jobstate.requeue(s, job.job_id, "crash: the child process died of signal SIGSEGV")
    assert _claim(url, job.job_id).attempt == 2

    while _job(url, job.job_id).interruptions < MAX_INTERRUPTIONS - 1:  # the worker keeps dying under it
        _worker_dies(url, job.job_id)
        assert _claim(url, job.job_id).job is not None
    counts = _worker_dies(url, job.job_id)
    assert counts["gave_up"] == 1
    with db.session_scope(url) as s:
        stored = result_store.load_stored(s, job_ids=[job.job_id])[0].result
        history = queries.attempts(s, job.job_id, stored)
    assert stored.status == "failed" and f"its worker was lost {MAX_INTERRUPTIONS} times" in stored.error
    causes = [a["cause"] for a in history]
    assert len(causes) == MAX_INTERRUPTIONS + 1 + 1  # every claim's end, then the result
    assert sum(c.startswith("interrupted: lease expired on worker mac-a") for c in causes) == MAX_INTERRUPTIONS
    assert sum(c.startswith("crash:") for c in causes) == 1 and causes[-1].startswith("failed: gave up")
    assert [a["attempt"] for a in history[:-1]] == list(range(1, MAX_INTERRUPTIONS + 2))
