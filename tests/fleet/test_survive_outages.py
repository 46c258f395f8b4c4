"""Long-running processes outlive their dependencies: the worker and the dashboard's runner.

Real processes, killed by the PID this test started: a private Redis killed and restarted, PostgreSQL cut
away through a TCP proxy (harness/fleet.py). Each outage is one log line when it starts and one when
it ends, and afterwards the same process does real work. (The reconcile loop's test is in test_fleet.py.)
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time

import pytest
import redis
from sqlalchemy import select

from siliconbench.contract.queues import celery_settings
from siliconbench.contract.spec import parse_sweep

from harness.fleet import ROOT, RedisServer, TcpCut, WorkerProc, wait_for
from siliconbench.coordinator.fleet import sweeps as fleet
from siliconbench.coordinator.fleet.reconcile import reconcile
from siliconbench.dashboard import runner
from siliconbench.embedded.run import plan
from siliconbench.storage import database
from siliconbench.storage.tables import Job, Sweep
from tests.conftest import SMALL, new_pg_database
from tests.fleet.support import job_rows, sweep, wait_done, worker_login

# Celery's consumer waits 2, 4, 6, ... s between reconnects: 12 s is three failed attempts, each one a chance
# for the consumer to give up or crash. Its default bound (100 attempts, ~49 min) is never reached by waiting
# here: test_the_broker_is_retried_forever checks that the bound is off.
BROKER_OUTAGE_S = 12
DB_OUTAGE_S = 6  # six failed heartbeats and more than a lease (SILICONBENCH_HEARTBEAT_S=1, LEASE_S=4: support.py)


def proxied(url: str, cut: TcpCut) -> str:
    return database.normalize_url(url).set(host="127.0.0.1", port=cut.port).render_as_string(hide_password=False)


def test_the_broker_is_retried_forever():
    conf = celery_settings("redis://127.0.0.1:6379/0")
    assert conf["broker_connection_max_retries"] is None and conf["broker_connection_retry"]
    assert conf["broker_connection_retry_on_startup"]


def test_worker_outlives_redis_killed_and_postgres_cut(models_dir, pg_url, workers):  # noqa: F811
    rs, cut = RedisServer().start(), TcpCut(database.normalize_url(pg_url).port or 5432)
    try:
        w = workers("mac-a", models_dir, broker=rs.url, database_url=proxied(pg_url, cut))
        pid = w.pid

        rs.kill9()
        wait_for(lambda: "the broker (Redis) is unreachable" in w.logs(), 30, what="the broker outage logged")
        time.sleep(BROKER_OUTAGE_S)
        assert w.alive() and w.proc.pid == pid
        rs.start()  # same port, empty
        wait_for(lambda: "the broker (Redis) is reachable again" in w.logs(), 60, what="the worker to reconnect")

        cut.cut()
        wait_for(lambda: "the database is unreachable" in w.logs(), 30, what="the database outage logged")
        time.sleep(DB_OUTAGE_S)
        assert w.alive()
        cut.restore()
        wait_for(lambda: "the database is reachable again" in w.logs(), 30, what="a heartbeat to go through")

        sid, _ = fleet.submit_sweep(sweep(engines=["llama.cpp"]), database_url=pg_url, broker_url=rs.url)
        wait_done(pg_url, sid, timeout_s=90)
        [(_, status, _, worker, _)] = job_rows(pg_url, sid)
        assert status == "ok" and worker == "mac-a" and w.alive() and w.proc.pid == pid  # the same process
        logs = w.logs()
        assert logs.count("is unreachable") == 2 and logs.count("is reachable again") == 2, logs[-3000:]
        assert "Trying again" not in logs and "Traceback" not in logs
    finally:
        rs.stop()
        cut.close()


def test_a_worker_whose_ack_met_a_dead_broker_consumes_again(models_dir, pg_url, workers):  # noqa: F811
    """Found by benchmarks/faults.py: Redis killed while a job ran, so the job's ack failed ("Couldn't ack"). kombu
    kept the delivery held, the worker (one job prefetched) never polled again and never noticed Redis come back:
    alive, registered and idle for good. Its QoS now frees the slot (siliconbench/worker/runtime/redis_transport.py)."""
    rs = RedisServer().start()
    try:
        w = workers("mac-a", models_dir, broker=rs.url)
        pid = w.pid
        # a cooldown in the job keeps it running long after it is claimed: Redis dies inside the job, not before
        first, _ = fleet.submit_sweep(sweep(engines=["llama.cpp"], delay_s=4), database_url=pg_url, broker_url=rs.url)
        wait_for(lambda: "attempt 1:" in w.logs(), 60, what="the worker to start the job")
        rs.kill9()
        wait_for(lambda: "Couldn't ack" in w.logs(), 90, what="the job's ack to meet the dead broker")
        rs.start()  # same port, empty: the first job's message is gone with it, its result is in PostgreSQL
        wait_done(pg_url, first, timeout_s=30)

        second, _ = fleet.submit_sweep(sweep(engines=["llama.cpp"]), database_url=pg_url, broker_url=rs.url)
        wait_done(pg_url, second, timeout_s=90)
        [(_, status, _, worker, _)] = job_rows(pg_url, second)
        assert status == "ok" and worker == "mac-a" and w.alive() and w.proc.pid == pid, w.logs()[-3000:]
    finally:
        rs.stop()


def test_a_job_whose_worker_died_waiting_to_claim_it_is_sent_again(models_dir, pg_url, broker_url, workers):  # noqa: F811
    """Found by benchmarks/faults.py: a worker took the message, waited for a cut database to claim it, and was
    killed; kombu keeps the message in Redis's unacked set for the 6.5 h visibility timeout, and the reconciler
    took it for a waiting message. A reservation older than reserved_grace_s no longer counts."""
    cut = TcpCut(database.normalize_url(pg_url).port or 5432)
    try:
        first = workers("mac-a", models_dir, database_url=proxied(pg_url, cut))
        cut.cut()
        sid, _ = fleet.submit_sweep(sweep(engines=["llama.cpp"]), database_url=pg_url, broker_url=broker_url)
        wait_for(lambda: "received" in first.logs(), 30, what="the worker to take the message")
        first.kill9()  # while its claim waits for the database
        cut.restore()
        assert redis.Redis.from_url(broker_url).hlen("unacked") == 1  # the message is parked, not lost
        workers("mac-a", models_dir)
        assert reconcile(pg_url, broker_url, grace_s=0)["message_lost"] == 0  # reserved just now: waiting
        time.sleep(3)
        assert reconcile(pg_url, broker_url, grace_s=0, reserved_grace_s=2)["message_lost"] == 1
        wait_done(pg_url, sid, timeout_s=60)
        [(_, status, attempts, _, _)] = job_rows(pg_url, sid)
        assert status == "ok" and attempts == 1
    finally:
        cut.close()


def _sweep(name: str, prompts: list[int], delay_s: float = 0.0):
    return parse_sweep(
        {
            "name": name,
            "models": [SMALL],
            "engines": ["llama.cpp"],
            "repetitions": 2,
            "warmup": 0,
            "delay_s": delay_s,
            "workloads": [{"kind": "generate", "prompt_tokens": prompts, "gen_tokens": [4]}],
        }
    )


def _start(url: str, models_dir, name: str, prompts: list[int], delay_s: float = 0.0) -> runner.Run:
    spec = _sweep(name, prompts, delay_s)
    return runner.start(spec, plan(spec, models_dir), database_url=url, models_dir=models_dir)


def _statuses(url: str, sweep_id: str) -> tuple[str, list[tuple[str, str | None]]]:
    with database.session_scope(url) as s:
        jobs = s.execute(select(Job.status, Job.error).where(Job.sweep_id == sweep_id).order_by(Job.idx)).all()
        return s.scalar(select(Sweep.status).where(Sweep.id == sweep_id)), [tuple(j) for j in jobs]


def _cut_while_running(run: runner.Run, direct: str, cut: TcpCut, outage_s: float, noticed=None) -> None:
    """Cut the database once the first job's result is in, for ``outage_s`` at least; with ``noticed``, until the
    runner has met the cut too (a job's child on a loaded machine may outlast a fixed outage)."""
    wait_for(lambda: _statuses(direct, run.sweep_id)[1][0][0] == "ok", 90, what="the first job's result")
    cut.cut()
    time.sleep(outage_s)
    if noticed is not None:
        wait_for(noticed, 180, every_s=0.5, what="the runner to meet the cut")
        time.sleep(1.0)
    assert run.alive  # waiting, not dead
    cut.restore()
    wait_for(lambda: not run.alive, 120, what="the sweep's end")


def test_dashboard_runner_waits_out_a_postgres_cut_and_runs_the_next_sweep(models_dir, caplog):
    with new_pg_database("sb_runner", migrated=True) as direct:
        cut = TcpCut(database.normalize_url(direct).port or 5432)
        url = proxied(direct, cut)
        try:
            with caplog.at_level(logging.WARNING, logger="siliconbench.dashboard"):
                run = _start(url, models_dir, "cut-me", [16, 20, 24, 28], delay_s=0.5)
                met = lambda: any(r.name == "siliconbench.dashboard" for r in caplog.records)  # noqa: E731
                _cut_while_running(run, direct, cut, outage_s=8, noticed=met)
            status, jobs = _statuses(direct, run.sweep_id)
            assert run.error is None and status == "done" and [st for st, _ in jobs] == ["ok"] * 4
            lines = [r.getMessage() for r in caplog.records if r.name == "siliconbench.dashboard"]
            assert len(lines) == 2 and "the database is unreachable" in lines[0] and "reachable again" in lines[1]

            nxt = _start(url, models_dir, "after-cut", [16])
            wait_for(lambda: not nxt.alive, 60, what="the next sweep")
            assert _statuses(direct, nxt.sweep_id) == ("done", [("ok", None)])
        finally:
            cut.close()
            database.dispose(url)


@pytest.mark.solo  # the outage must outlast a job, which a loaded machine stretches past it
def test_dashboard_runner_gives_a_sweep_up_past_its_patience_and_says_why(models_dir, monkeypatch):
    monkeypatch.setattr(runner, "DB_PATIENCE_S", 3.0)
    with new_pg_database("sb_runner", migrated=True) as direct:
        cut = TcpCut(database.normalize_url(direct).port or 5432)
        url = proxied(direct, cut)
        try:
            run = _start(url, models_dir, "give-up", [16, 20, 24, 28], delay_s=0.5)
            _cut_while_running(run, direct, cut, outage_s=8)
            assert run.error.startswith("stopped: the database was unreachable for more than 3 s")
            status, jobs = _statuses(direct, run.sweep_id)
            assert status == "done" and jobs[0] == ("ok", None)
            gave_up = [e for st, e in jobs if st == "failed"]
            assert jobs[-1][0] == "failed" and all(e == run.error for e in gave_up)
            assert {st for st, _ in jobs} == {"ok", "failed"}

            nxt = _start(url, models_dir, "after-give-up", [16])
            wait_for(lambda: not nxt.alive, 60, what="the next sweep")
            assert _statuses(direct, nxt.sweep_id) == ("done", [("ok", None)])
        finally:
            cut.close()
            database.dispose(url)


def test_a_worker_and_the_reconciler_started_while_the_database_is_cut_wait_for_it(
    models_dir, pg_url, broker_url, tmp_path
):  # noqa: F811
    """Started during an outage (a supervisor restarting them in the middle of one), they wait, one line each way."""
    cut = TcpCut(database.normalize_url(pg_url).port or 5432)
    url = proxied(worker_login(pg_url, "mac-a"), cut)
    cut.cut()
    w = WorkerProc(
        "mac-a",
        broker=broker_url,
        database=url,
        models_dir=models_dir,
        log_dir=tmp_path,
        env={"SILICONBENCH_LEASE_S": "4"},
    )
    log = open(tmp_path / "reconcile.log", "wb")
    env = {**os.environ, "SILICONBENCH_DATABASE_URL": proxied(pg_url, cut), "SILICONBENCH_BROKER_URL": broker_url}
    rec = subprocess.Popen(
        [sys.executable, "-m", "siliconbench.cli.main", "reconcile", "--loop", "--every", "1"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        rec_log = lambda: (tmp_path / "reconcile.log").read_text()  # noqa: E731
        wait_for(lambda: "the database is unreachable" in w.logs(), 60, what="the worker to wait for the database")
        wait_for(lambda: "the database is unreachable" in rec_log(), 60, what="the reconciler to wait")
        time.sleep(5)
        assert w.alive() and rec.poll() is None
        cut.restore()
        w.wait_ready(90)
        wait_for(lambda: "the database is reachable again" in rec_log(), 60, what="the reconciler to go on")
        sid, _ = fleet.submit_sweep(sweep(engines=["llama.cpp"]), database_url=pg_url, broker_url=broker_url)
        wait_done(pg_url, sid, timeout_s=90)
        assert [r.status for r in job_rows(pg_url, sid)] == ["ok"] and w.alive() and rec.poll() is None
        assert "Traceback" not in w.logs() + rec_log()
    finally:
        rec.terminate()
        rec.wait(10)
        w.stop()
        cut.close()
