"""The worker's claim commits without waiting for its fsync (jobstate.try_claim, durable=False): the
connection's other writes stay synchronous, and a claim a server crash loses costs no result and doubles
none. Real PostgreSQL with worker logins and the real reconciler; the crash is the claim's row rolled back.
"""

from __future__ import annotations

import pytest
import redis
from sqlalchemy import func, select, text, update
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.orm import Session

from coordinator.reconcile import reconcile
from storage import database as db, jobstate, roles, store
from storage.tables import Job, Result

from .conftest import new_pg_database
from .test_storage import JOBS, SPEC, SWEEP_ID, make_result

BROKER = "redis://127.0.0.1:6379/5"


@pytest.fixture
def url():
    with new_pg_database("sb_async_claim") as u:
        db.upgrade(u)
        with db.session_scope(u) as s:
            store.create_sweep(s, SWEEP_ID, SPEC, JOBS[:1])
            s.execute(update(Job).values(queue="cap.noop", enqueued_at=func.now() - text("interval '1 hour'")))
        yield u


def _autocommit(url: str, host: str) -> Session:
    """As worker.task._HeldConnection: the worker's own login, autocommitted."""
    login = roles.create_login(url, "worker", roles.login_for(host), host=host).rendered()
    return Session(bind=db.engine_for(login).connect().execution_options(isolation_level="AUTOCOMMIT"))


def test_only_the_claim_skips_the_fsync(url):
    s = _autocommit(url, "mini-1")
    job = JOBS[0]
    assert jobstate.try_claim(s, job.job_id, worker="mini-1", host="mini-1", durable=False).job is not None
    assert s.scalar(text("SHOW synchronous_commit")) == "on"  # the result written next waits for its flush
    assert store.save_result(s, job, make_result(job), host="mini-1", worker="mini-1")
    s.close()


def test_a_lost_claim_loses_no_result_and_doubles_none(url):
    redis.Redis.from_url(BROKER).flushdb()
    job = JOBS[0]
    a = _autocommit(url, "mini-1")
    assert jobstate.try_claim(a, job.job_id, worker="mini-1", host="mini-1", durable=False).job is not None
    with db.session_scope(url) as s:  # the server crashes before the claim's WAL is flushed: the job is as before
        s.execute(update(Job).values(status="queued", worker=None, host=None, started_at=None, lease_expires_at=None,
                                     attempts=0))
    with pytest.raises(ProgrammingError) as refused:  # the worker's result: refused, not written for a job not its own
        store.save_result(a, job, make_result(job), host="mini-1", worker="mini-1")
    assert roles.refused_by_rules(refused.value)
    # Its message was acked: the reconciler finds the queued job without one and sends it again.
    assert reconcile(url, BROKER, grace_s=0)["message_lost"] == 1
    b = _autocommit(url, "mini-2")
    assert jobstate.try_claim(b, job.job_id, worker="mini-2", host="mini-2", durable=False).job is not None
    assert store.save_result(b, job, make_result(job), host="mini-2", worker="mini-2")
    assert not store.save_result(b, job, make_result(job), host="mini-2", worker="mini-2")  # redelivered: a no-op
    with db.session_scope(url) as s:
        assert s.scalar(select(func.count()).select_from(Result).where(Result.job_id == job.job_id)) == 1
        assert s.get(Job, job.job_id).status == "ok"
    a.close(), b.close()
