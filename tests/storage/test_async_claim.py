"""The worker's claim commits without waiting for its fsync (jobstate.try_claim, durable=False): the
connection's other writes stay synchronous, and a claim a server crash loses costs no result and doubles
none. Real PostgreSQL with worker logins and the real reconciler; the crash is the claim's row rolled back.

The worker runs the claim and the result write on its held connection's bare psycopg cursor, prepared
(siliconbench.storage.hot_path.HeldConnection.execute): it writes what a Session writes (SQLite's statement-per-step path
is the reference), its result commit is synchronous, and its errors are SQLAlchemy's, as from a Session.
"""

from __future__ import annotations

import psycopg
import pytest
import redis
from sqlalchemy import func, select, text, update
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.orm import Session

from siliconbench.contract.results import JobResult, JobStatus

from siliconbench.coordinator.fleet.reconcile import reconcile
from siliconbench.storage import database as db, jobstate, result_store, roles, sweep_store
from siliconbench.storage.hot_path import HeldConnection
from siliconbench.storage.tables import Job, Result, ResultIdentity, ResultSummary
from tests.conftest import new_pg_database
from tests.storage.records import JOBS, SPEC, SWEEP_ID, make_result

BROKER = "redis://127.0.0.1:6379/8"  # this module's own Redis database (flushed here)


@pytest.fixture
def url():
    with new_pg_database("sb_async_claim", migrated=True) as u:
        with db.session_scope(u) as s:
            sweep_store.create_sweep(s, SWEEP_ID, SPEC, JOBS[:1])
            s.execute(update(Job).values(queue="cap.noop", enqueued_at=func.now() - text("interval '1 hour'")))
        yield u


def _autocommit(url: str, host: str) -> Session:
    """As siliconbench.storage.hot_path.HeldConnection: the worker's own login, autocommitted."""
    login = roles.create_login(url, "worker", roles.login_for(host), host=host).rendered()
    return Session(bind=db.engine_for(login).connect().execution_options(isolation_level="AUTOCOMMIT"))


def test_only_the_claim_skips_the_fsync(url):
    s = _autocommit(url, "mini-1")
    job = JOBS[0]
    assert jobstate.try_claim(s, job.job_id, worker="mini-1", host="mini-1", durable=False).job is not None
    assert s.scalar(text("SHOW synchronous_commit")) == "on"  # the result written next waits for its flush
    assert result_store.save_result(s, job, make_result(job), host="mini-1", worker="mini-1")
    s.close()


def test_a_lost_claim_loses_no_result_and_doubles_none(url):
    redis.Redis.from_url(BROKER).flushdb()
    job = JOBS[0]
    a = _autocommit(url, "mini-1")
    assert jobstate.try_claim(a, job.job_id, worker="mini-1", host="mini-1", durable=False).job is not None
    with db.session_scope(url) as s:  # the server crashes before the claim's WAL is flushed: the job is as before
        s.execute(
            update(Job).values(
                status="queued", worker=None, host=None, started_at=None, lease_expires_at=None, attempts=0
            )
        )
    with pytest.raises(ProgrammingError) as refused:  # the worker's result: refused, not written for a job not its own
        result_store.save_result(a, job, make_result(job), host="mini-1", worker="mini-1")
    assert roles.refused_by_rules(refused.value)
    # Its message was acked: the reconciler finds the queued job without one and sends it again.
    assert reconcile(url, BROKER, grace_s=0)["message_lost"] == 1
    b = _autocommit(url, "mini-2")
    assert jobstate.try_claim(b, job.job_id, worker="mini-2", host="mini-2", durable=False).job is not None
    assert result_store.save_result(b, job, make_result(job), host="mini-2", worker="mini-2")
    assert not result_store.save_result(
        b, job, make_result(job), host="mini-2", worker="mini-2"
    )  # redelivered: a no-op
    with db.session_scope(url) as s:
        assert s.scalar(select(func.count()).select_from(Result).where(Result.job_id == job.job_id)) == 1
        assert s.get(Job, job.job_id).status == "ok"
    a.close(), b.close()


def _held(url: str, host: str | None) -> HeldConnection:
    """The worker's held connection, on its own login (None: the owner's)."""
    return HeldConnection(
        url if host is None else roles.create_login(url, "worker", roles.login_for(host), host=host).rendered()
    )


def _stored(url: str, job_id: str) -> tuple:
    """Everything a result write leaves: the result with its samples (in order), summaries, identity, job row."""
    with db.session_scope(url) as s:
        (stored,) = result_store.load_stored(s, job_ids=[job_id])
        summaries = [
            (r.metric, r.n, r.mean, r.median, r.var, r.min, r.max, r.identity_hash, r.status, r.disturbed)
            for r in s.scalars(
                select(ResultSummary).where(ResultSummary.job_id == job_id).order_by(ResultSummary.metric)
            )
        ]
        identity = s.scalar(
            select(ResultIdentity.job_id).where(ResultIdentity.identity_hash == stored.result.identity_hash(stored.job))
        )
        j = s.get(Job, job_id)
        job_row = (j.status, j.host, j.worker, j.started_at, j.finished_at, j.error, j.lease_expires_at, j.attempts)
    return stored.job, stored.result, stored.host, stored.worker, summaries, identity, job_row


def test_the_worker_path_writes_what_a_session_writes(url, tmp_path):
    job, result = JOBS[0], make_result(JOBS[0])
    lite = f"sqlite:///{tmp_path / 'reference.sqlite'}"  # the reference: SQLite's statement-per-step writes
    db.upgrade(lite)
    with db.session_scope(lite) as s:
        sweep_store.create_sweep(s, SWEEP_ID, SPEC, JOBS[:1])
        s.flush()
        assert sweep_store.mark_running(s, job.job_id, host="mini-1", worker="mini-1")
        assert result_store.save_result(s, job, result, host="mini-1", worker="mini-1")

    held = _held(url, "mini-1")
    claim = jobstate.try_claim_async_with(held.execute, job.job_id, worker="mini-1", host="mini-1")
    assert claim.job == job and claim.attempt == 1
    assert held.execute("SHOW synchronous_commit", {}) == ("on",)  # the claim's set_config ended with it
    assert result_store.save_result_with(held.execute, job, result, host="mini-1", worker="mini-1")
    assert not result_store.save_result_with(held.execute, job, result, host="mini-1", worker="mini-1")  # redelivered
    prepared = [sql for (sql,) in held.cursor.execute("SELECT statement FROM pg_prepared_statements").fetchall()]
    assert jobstate.CLAIM_ASYNC_SQL.split()[:2] == ["UPDATE", "jobs"] and any("UPDATE jobs SET" in p for p in prepared)
    assert any("INSERT INTO results" in p for p in prepared)  # parsed and planned once, then Bind/Execute
    held.close()

    pg, ref = _stored(url, job.job_id), _stored(lite, job.job_id)
    assert pg[:6] == ref[:6] and pg[1].samples == result.samples and pg[4]  # samples in order, summaries written
    assert pg[6][:7] == ref[6][:7]  # the job's final status, host, worker, times, error, lease cleared
    db.dispose(lite)


def test_the_worker_path_without_samples_or_times(url, tmp_path):
    job = JOBS[0]
    bare = JobResult(job_id=job.job_id, status=JobStatus.failed, error="crash: boom")  # no samples, no started_at
    held = _held(url, "mini-1")
    assert jobstate.try_claim_async_with(held.execute, job.job_id, worker="mini-1", host="mini-1") is not None
    with db.session_scope(url) as s:
        started = s.get(Job, job.job_id).started_at
    assert result_store.save_result_with(held.execute, job, bare, host="mini-1", worker="mini-1")
    held.close()
    stored_job, stored, *_, job_row = _stored(url, job.job_id)
    assert stored.status == "failed" and stored.error == "crash: boom" and not stored.samples
    assert job_row[:3] == ("failed", "mini-1", "mini-1") and job_row[3] == started  # the claim's start is kept


def test_the_worker_path_raises_what_a_session_raises(url):
    job = JOBS[0]
    a, b = _held(url, "mini-1"), _held(url, "mini-2")
    assert jobstate.try_claim_async_with(a.execute, job.job_id, worker="mini-1", host="mini-1") is not None
    with pytest.raises(ProgrammingError) as refused:  # mini-2 writing for a job mini-1 holds
        result_store.save_result_with(b.execute, job, make_result(job), host="mini-2", worker="mini-2")
    assert roles.refused_by_rules(refused.value) and b.conn is None  # the connection is dropped, as before
    owner = _held(url, None)
    with pytest.raises(result_store.UnknownJob):  # the owner has no row-level rule: the foreign key refuses it
        result_store.save_result_with(owner.execute, JOBS[1], make_result(JOBS[1]))
    # The server ends the held connection while it idles (a restart): the call goes through on a fresh one.
    (pid,) = a.execute("SELECT pg_backend_pid()", {})
    with psycopg.connect(
        db.normalize_url(url).set(drivername="postgresql").render_as_string(hide_password=False), autocommit=True
    ) as c:
        c.execute("SELECT pg_terminate_backend(%s)", [pid])
    assert result_store.save_result_with(a.execute, job, make_result(job), host="mini-1", worker="mini-1")
    assert a.execute("SELECT pg_backend_pid()", {}) != (pid,)
    a.close(), b.close(), owner.close()


# ------------------------------------------------------------- a short job's result: no wait for its flush


def test_a_short_jobs_result_skips_the_fsync(url):
    job = JOBS[0]
    held = _held(url, "mini-1")
    assert result_store.SAVE_SQL_ASYNC.endswith("set_config('synchronous_commit', 'off', true) FROM ins")
    assert (
        result_store.SAVE_SQL_ASYNC.removesuffix(", set_config('synchronous_commit', 'off', true) FROM ins")
        + " FROM ins"
        == result_store.SAVE_SQL
    )  # the same writes: only the commit's wait differs
    assert jobstate.try_claim_async_with(held.execute, job.job_id, worker="mini-1", host="mini-1") is not None
    assert result_store.save_result_with(
        held.execute, job, make_result(job), host="mini-1", worker="mini-1", durable=False
    )
    assert held.execute("SHOW synchronous_commit", {}) == ("on",)  # its set_config ended with its transaction
    assert not result_store.save_result_with(
        held.execute, job, make_result(job), host="mini-1", worker="mini-1", durable=False
    )  # redelivered: a no-op, as the durable write
    held.close()
    assert _stored(url, job.job_id)[6][0] == "ok"


def test_a_lost_short_result_is_run_again_once(url):
    """The server crashes after the claim's WAL was flushed but before the short job's result was: the job is
    running on the worker's lease, its message acked. The lease expires, the reconciler sends it again, and
    one result is written."""
    redis.Redis.from_url(BROKER).flushdb()
    job = JOBS[0]
    a = _held(url, "mini-1")
    assert jobstate.try_claim_async_with(a.execute, job.job_id, worker="mini-1", host="mini-1") is not None
    with db.session_scope(url) as s:  # the flushed claim, its lease already run out (the worker is gone)
        s.execute(update(Job).values(lease_expires_at=func.now() - text("interval '1 minute'")))
    counts = reconcile(url, BROKER, grace_s=0)
    assert counts["lease_expired"] == 1 and redis.Redis.from_url(BROKER).llen("cap.noop") == 1
    b = _held(url, "mini-2")
    again = jobstate.try_claim_async_with(b.execute, job.job_id, worker="mini-2", host="mini-2")
    assert again is not None and again.attempt == 1  # a lost worker is an interruption, not one of its attempts
    assert result_store.save_result_with(
        b.execute, job, make_result(job), host="mini-2", worker="mini-2", durable=False
    )
    with pytest.raises(ProgrammingError):  # the first worker, had it lived on: no longer its job
        result_store.save_result_with(a.execute, job, make_result(job), host="mini-1", worker="mini-1", durable=False)
    with db.session_scope(url) as s:
        assert s.scalar(select(func.count()).select_from(Result).where(Result.job_id == job.job_id)) == 1
    a.close(), b.close()


def test_the_worker_waits_for_the_flush_only_after_a_long_job(url, tmp_path, monkeypatch):
    """handle_job on real no-op jobs: under durable_after_s the result commits without waiting; with the
    threshold at 0 (every job long enough) it waits, as a real benchmark job's result does."""
    import siliconbench.storage.hot_path as hot_path
    import siliconbench.worker.runtime.task as task
    from siliconbench.worker.runtime.spool import Spool

    noop = [j.model_copy(update={"workload": "noop", "sweep_id": "noop"}) for j in JOBS[1:3]]  # as test_service
    with db.session_scope(url) as s:
        sweep_store.create_sweep(s, "noop", SPEC, noop)
    login = roles.create_login(url, "worker", roles.login_for("mini-1"), host="mini-1").rendered()
    ctx = task.WorkerContext(
        name="mini-1", database_url=login, models_dir=tmp_path, spool=Spool(tmp_path / "spool"), hostname="mini-1"
    )
    waited = []
    real = hot_path.save_result_with  # the held connection's one-statement write
    monkeypatch.setattr(hot_path, "save_result_with", lambda *a, **kw: waited.append(kw["durable"]) or real(*a, **kw))
    assert task.handle_job(noop[0].job_id, ctx) == "ok"
    ctx.durable_after_s = 0.0  # SILICONBENCH_DURABLE_AFTER_S=0: every result waits
    assert task.handle_job(noop[1].job_id, ctx) == "ok"
    assert waited == [False, True]
    assert task.handle_job(noop[0].job_id, ctx).startswith("refused: job is ok")  # redelivered: no work
    ctx.held.close()
