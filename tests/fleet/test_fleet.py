"""The fleet on real processes: Celery workers (subprocesses), the real Redis and PostgreSQL.

Two workers with different names stand for two Macs. Faults are real: kill -9 by PID, a Redis
restarted without persistence, PostgreSQL cut away from a worker, pickle and malformed messages.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from sqlalchemy import func, select, update

from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import ModelCatalog

from harness.fleet import ROOT, RedisServer, TcpCut, wait_for
from siliconbench.coordinator.fleet import sweeps as fleet
from siliconbench.storage import database, sweep_store
from siliconbench.storage.tables import Job, Result, utcnow
from siliconbench.worker.runtime.redis_transport import malformed
from tests.conftest import SMALL
from tests.fleet.support import job_rows, results_of, sweep, wait_done

EXTRA = "tiny-llama-extra"


@pytest.fixture(scope="session")
def models_a(models_dir, tmp_path_factory) -> Path:
    """Host A's models: the shared small model plus one only A has (hard links: no copy, same digests)."""
    from siliconbench.worker.models.make.tiny import make_tiny

    d = tmp_path_factory.mktemp("models-a")
    shutil.copytree(models_dir / SMALL, d / SMALL, copy_function=os.link)
    make_tiny(d, name=EXTRA, hidden_size=256, n_layers=2, n_heads=4, n_kv_heads=2, seed=1)
    return d


def test_placement_each_runs_every_job_on_both_workers(models_dir, pg_url, broker_url, workers):
    workers("mac-a", models_dir)
    workers("mac-b", models_dir)
    sid, placement = fleet.submit_sweep(
        sweep(hosts="all", placement="each"), database_url=pg_url, broker_url=broker_url
    )
    assert placement.assignments() == {"host.mac-a": 2, "host.mac-b": 2}
    wait_done(pg_url, sid)
    records = results_of(pg_url, sid)
    assert sorted((r["worker"], r["engine"]) for r in records) == [
        ("mac-a", "llama.cpp"),
        ("mac-a", "mlx"),
        ("mac-b", "llama.cpp"),
        ("mac-b", "mlx"),
    ]
    assert all(r["status"] == "ok" and r["sweep_id"] == sid and len(r["decode_tps"]["samples"]) == 2 for r in records)
    assert all(attempts == 1 for _, _, attempts, _, _ in job_rows(pg_url, sid))


def test_routing_by_capability(models_dir, models_a, pg_url, broker_url, workers):
    workers("mac-a", models_a)  # both engines, both models
    workers("mac-b", models_dir, engines="mlx")  # an MLX-only Mac without the extra model
    with database.session_scope(pg_url) as s:
        hosts = {h["name"]: h for h in fleet.list_hosts(s)}
    assert set(hosts["mac-b"]["engines"]) == {"mlx"} and hosts["mac-b"]["models"] == [SMALL]
    sid, placement = fleet.submit_sweep(
        sweep(models=[SMALL, EXTRA], placement="any"), database_url=pg_url, broker_url=broker_url
    )
    wait_done(pg_url, sid)
    ran = {(r["model"], r["engine"]): r["worker"] for r in results_of(pg_url, sid)}
    assert ran[(EXTRA, "llama.cpp")] == ran[(EXTRA, "mlx")] == ran[(SMALL, "llama.cpp")] == "mac-a"
    assert ran[(SMALL, "mlx")] in {"mac-a", "mac-b"}


def test_submit_refuses_what_fits_nowhere(models_dir, pg_url, broker_url, workers):
    from siliconbench.contract.errors import UserError

    with pytest.raises(UserError, match="no live worker"):
        fleet.submit_sweep(sweep(), database_url=pg_url, broker_url=broker_url)
    workers("mac-b", models_dir, engines="mlx")
    with pytest.raises(UserError) as e:
        fleet.submit_sweep(sweep(engines=["llama.cpp"]), database_url=pg_url, broker_url=broker_url)
    assert e.value.field == "hosts" and "has no llama.cpp installed" in e.value.message
    with pytest.raises(UserError, match="no registered worker named 'mac-z'"):
        fleet.submit_sweep(sweep(hosts=["mac-z"]), database_url=pg_url, broker_url=broker_url)
    with database.session_scope(pg_url) as s:
        assert s.scalar(select(func.count()).select_from(Job)) == 0  # nothing written
    assert redis.Redis.from_url(broker_url).llen("host.mac-b") == 0  # nothing enqueued


def test_kill9_mid_job_then_fresh_worker_runs_it_once(models_dir, pg_url, broker_url, workers):
    first = workers("mac-a", models_dir)
    sid, _ = fleet.submit_sweep(
        sweep(engines=["llama.cpp"], repetitions=8, delay_s=1.0), database_url=pg_url, broker_url=broker_url
    )
    wait_for(lambda: any(st == "running" for _, st, *_ in job_rows(pg_url, sid)), 60, what="the job to start")
    first.kill9()
    assert not first.alive()
    workers("mac-a", models_dir)  # the Mac comes back
    wait_done(pg_url, sid, broker=broker_url, timeout_s=180)
    [(job_id, status, attempts, worker, _)] = job_rows(pg_url, sid)
    assert status == "ok" and attempts == 2
    with database.session_scope(pg_url) as s:
        assert s.scalar(select(func.count()).select_from(Result).where(Result.job_id == job_id)) == 1


def test_redis_restart_loses_no_job(models_dir, pg_url, workers):
    r = RedisServer().start()
    try:
        workers("mac-a", models_dir, broker=r.url)
        sid, _ = fleet.submit_sweep(
            sweep(workloads=[{"kind": "generate", "prompt_tokens": [16, 24, 32], "gen_tokens": [4]}], delay_s=0.5),
            database_url=pg_url,
            broker_url=r.url,
        )
        wait_for(lambda: any(st == "running" for _, st, *_ in job_rows(pg_url, sid)), 60, what="a job to start")
        r.kill9()  # no persistence: every queued message is gone
        r.start()
        prog = wait_done(pg_url, sid, broker=r.url, timeout_s=240)
        assert prog["mac-a"].get("ok") == 6, prog
        assert len(results_of(pg_url, sid)) == 6
    finally:
        r.stop()


def test_database_unreachable_from_worker_loses_no_result(models_dir, pg_url, broker_url, workers):
    cut = TcpCut(database.normalize_url(pg_url).port or 5432)
    try:
        proxied = (
            database.normalize_url(pg_url).set(host="127.0.0.1", port=cut.port).render_as_string(hide_password=False)
        )
        w = workers("mac-a", models_dir, database_url=proxied)
        sid, _ = fleet.submit_sweep(
            sweep(engines=["mlx"], repetitions=4, delay_s=0.5), database_url=pg_url, broker_url=broker_url
        )
        wait_for(lambda: any(st == "running" for _, st, *_ in job_rows(pg_url, sid)), 60, what="the job to start")
        cut.cut()
        wait_for(lambda: list(w.spool_dir.glob("*.json")), 90, what="the result to be spooled")
        assert len(results_of(pg_url, sid)) == 0
        cut.restore()
        wait_for(lambda: len(results_of(pg_url, sid)) == 1, 60, what="the spooled result to be written")
        wait_for(lambda: not list(w.spool_dir.glob("*.json")), 30, what="the spool to empty")
        assert results_of(pg_url, sid)[0]["status"] == "ok"
    finally:
        cut.close()


def test_pickle_and_malformed_messages_are_refused(models_dir, pg_url, broker_url, workers):
    from kombu import Connection

    w = workers("mac-a", models_dir)
    with Connection(broker_url) as conn:
        producer = conn.Producer()
        for body, serializer in [
            ((["0123456789abcdef"], {}, {}), "pickle"),
            (([{"no": "id"}], {}, {}), "json"),
            ((["../../etc/passwd"], {}, {}), "json"),
            (("not a task body",), "json"),
        ]:
            producer.publish(
                body,
                routing_key="host.mac-a",
                serializer=serializer,
                headers={"task": "siliconbench.run_job", "id": uuid.uuid4().hex, "lang": "py"},
            )
    sid, _ = fleet.submit_sweep(sweep(engines=["llama.cpp"]), database_url=pg_url, broker_url=broker_url)
    wait_done(pg_url, sid)
    assert w.alive()
    logs = w.logs()
    assert "pickle" in logs.lower()
    assert "malformed" in logs
    assert results_of(pg_url, sid)[0]["status"] == "ok"


def _envelope(body: str, **props) -> bytes:
    return json.dumps(
        {
            "body": body,
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {"task": "siliconbench.run_job", "id": uuid.uuid4().hex, "lang": "py"},
            "properties": {
                "body_encoding": "base64",
                "delivery_tag": uuid.uuid4().hex,
                "delivery_info": {"exchange": "", "routing_key": "host.mac-a"},
                **props,
            },
        }
    ).encode()


# What kombu could not decode before siliconbench/worker/runtime/redis_transport.py (the worker died on each), and more of the kind.
UNDECODABLE = {
    "not JSON": b"\xff\xfe\x00 {not json",
    "a JSON list": b'["0123456789abcdef", {}]',
    "a JSON string": b'"secret-payload-string"',
    "a JSON number": b"42",
    "an envelope without properties": json.dumps({"body": "e30=", "headers": {}}).encode(),
    "a body that is not base64": _envelope("!!! not base64 !!!"),
    "delivery_info that is not an object": _envelope("e30=", delivery_info="nope"),
    "a huge item": b'{"body": "' + b"A" * (2 << 20) + b'"}',
}


def test_items_kombu_cannot_decode_are_parked_and_the_same_worker_goes_on(models_dir, pg_url, broker_url, workers):
    w = workers("mac-a", models_dir)
    r = redis.Redis.from_url(broker_url)
    for item in UNDECODABLE.values():
        r.lpush("host.mac-a", item)  # straight onto the worker's own queue, as a hostile client would
    wait_for(lambda: r.llen("host.mac-a") == 0, 30, what="the worker to pop every item")
    sid, _ = fleet.submit_sweep(sweep(engines=["llama.cpp"]), database_url=pg_url, broker_url=broker_url)
    wait_done(pg_url, sid)
    assert w.alive() and results_of(pg_url, sid)[0]["status"] == "ok"  # the same process ran the next real job
    parked = [json.loads(x) for x in r.lrange("siliconbench.dead-letter", 0, -1)]
    assert sorted(p["reason"].split(",")[0] for p in parked) == sorted(
        malformed(item).split(",")[0] for item in UNDECODABLE.values()
    )
    assert all(p["queue"] == "host.mac-a" and len(p["head"]) <= 4096 for p in parked)
    logs = w.logs()
    assert logs.count("dropped a malformed message from queue host.mac-a") == len(UNDECODABLE)
    assert "secret-payload-string" not in logs and "Unrecoverable error" not in logs


def test_job_that_always_crashes_fails_after_bounded_attempts(models_dir, pg_url, broker_url, workers):
    w = workers("mac-a", models_dir, env={"SILICONBENCH_FAULT": "crash"})
    sid, _ = fleet.submit_sweep(sweep(engines=["llama.cpp"]), database_url=pg_url, broker_url=broker_url)
    wait_done(pg_url, sid, timeout_s=120)
    [(_, status, attempts, _, error)] = job_rows(pg_url, sid)
    assert status == "failed" and attempts == 3
    assert "SIGABRT" in error
    assert w.alive()


def test_cancel_stops_what_has_not_started(models_dir, pg_url, broker_url, workers):
    sid = None
    workers("mac-a", models_dir)
    sid, _ = fleet.submit_sweep(
        sweep(workloads=[{"kind": "generate", "prompt_tokens": [16, 20, 24, 28], "gen_tokens": [4]}], delay_s=0.5),
        database_url=pg_url,
        broker_url=broker_url,
    )
    wait_for(lambda: any(st == "running" for _, st, *_ in job_rows(pg_url, sid)), 60, what="a job to start")
    with database.session_scope(pg_url) as s:
        n = fleet.cancel(s, sid, broker_url)
    assert n >= 1
    prog = wait_done(pg_url, sid)
    total = sum(prog["mac-a"].values()) if "mac-a" in prog else 0
    cancelled = sum(c.get("cancelled", 0) for c in prog.values())
    assert cancelled == n and total + sum(c.get("cancelled", 0) for h, c in prog.items() if h != "mac-a") == 8
    with database.session_scope(pg_url) as s:
        assert sweep_store.sweep_progress(s, sid).get("cancelled") == n


def _ghost_job(pg_url, models_dir) -> str:
    """A queued job whose message is nowhere (no worker consumes host.ghost): the reconciler must resend it."""
    spec = sweep(engines=["llama.cpp"])
    job = expand(spec, ModelCatalog(models_dir))[0]
    with database.session_scope(pg_url) as s:
        sweep_store.create_sweep(s, job.sweep_id, spec, [job])
    _make_stale(pg_url, job.job_id)
    return job.job_id


def _make_stale(pg_url: str, job_id: str) -> None:
    with database.session_scope(pg_url) as s:
        s.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(status="queued", queue="host.ghost", enqueued_at=utcnow() - timedelta(minutes=5))
        )


def test_reconcile_loop_outlives_the_broker_and_the_database(models_dir, pg_url, tmp_path):
    """`siliconbench reconcile --loop` as a real process: its private Redis killed by PID and restarted, its
    PostgreSQL cut and restored; it logs one line per outage and per recovery and still resends lost jobs."""
    rs, cut = RedisServer().start(), TcpCut(database.normalize_url(pg_url).port or 5432)
    proxied = database.normalize_url(pg_url).set(host="127.0.0.1", port=cut.port).render_as_string(hide_password=False)
    log_path = tmp_path / "reconcile.log"
    job_id = _ghost_job(pg_url, models_dir)
    r = redis.Redis.from_url(rs.url)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "siliconbench.cli.main", "reconcile", "--loop", "--every", "0.5"],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "SILICONBENCH_BROKER_URL": rs.url, "SILICONBENCH_DATABASE_URL": proxied},
        )
    try:
        wait_for(lambda: r.llen("host.ghost") == 1, 30, what="the lost job resent")
        rs.kill9()
        wait_for(lambda: "the broker (Redis) is unreachable" in log_path.read_text(), 30, what="the outage logged")
        time.sleep(2)
        assert proc.poll() is None
        rs.start()  # same port, empty: the resent message is gone with it
        wait_for(lambda: "reachable again" in log_path.read_text(), 90, what="the recovery logged")
        cut.cut()
        wait_for(lambda: "the database is unreachable" in log_path.read_text(), 30, what="the database outage logged")
        time.sleep(2)
        assert proc.poll() is None
        cut.restore()
        wait_for(lambda: log_path.read_text().count("reachable again") == 2, 90, what="the second recovery")
        r.delete("host.ghost")
        _make_stale(pg_url, job_id)
        wait_for(lambda: r.llen("host.ghost") == 1, 30, what="the reconciler still resending after both outages")
        text = log_path.read_text()
        assert text.count("is unreachable") == 2 and "Traceback" not in text
    finally:
        proc.kill()  # by the PID this test started
        proc.wait()
        rs.stop()
        cut.close()
