"""Helpers of the fleet tests: a worker's own login, a small sweep, waiting for a sweep, its rows and records, the
prepare tasks waiting on a host's queue."""

from __future__ import annotations

import base64
import json

import redis
from sqlalchemy import select

from siliconbench.contract.queues import TASK_PREPARE_ENV, host_queue
from siliconbench.contract.spec import parse_sweep

from harness.fleet import wait_for
from siliconbench.coordinator.fleet import sweeps as fleet
from siliconbench.coordinator.fleet.reconcile import reconcile
from siliconbench.storage import database, roles
from siliconbench.storage.tables import Job
from tests.conftest import SMALL

LEASE_S = "4"  # short leases so a dead worker's job comes back within seconds
HEARTBEAT_S = "1"  # a worker sees the database back, and flushes its spool, within a second


def worker_login(pg_url: str, name: str, database_url: str | None = None) -> str:
    """The worker's own least-privilege login (as `siliconbench db worker-role NAME` makes it), on ``database_url``
    (e.g. a TcpCut in front of the same database) or ``pg_url``: every fleet test's worker runs on one."""
    login = roles.create_login(pg_url, "worker", roles.login_for(name), host=name)
    target = database.normalize_url(database_url or pg_url)
    return target.set(username=login.url.username, password=login.url.password).render_as_string(hide_password=False)


def sweep(**kw):
    base = {
        "name": "fleet",
        "models": [SMALL],
        "repetitions": 2,
        "warmup": 0,
        "workloads": [{"kind": "generate", "prompt_tokens": [16], "gen_tokens": [4]}],
    }
    return parse_sweep({**base, **kw})


def wait_done(pg_url: str, sweep_id: str, broker: str | None = None, timeout_s: float = 120) -> dict:
    def finished():
        if broker:
            reconcile(pg_url, broker, grace_s=2)
        with database.session_scope(pg_url) as s:
            prog = fleet.progress(s, sweep_id)
        pending = sum(c.get("queued", 0) + c.get("running", 0) for c in prog.values())
        return prog if not pending else None

    return wait_for(finished, timeout_s, every_s=1.0, what=f"sweep {sweep_id} to finish")


def results_of(pg_url: str, sweep_id: str) -> list[dict]:
    from siliconbench.coordinator.reports.export import load_records

    with database.session_scope(pg_url) as s:
        return load_records(s, sweep_id=sweep_id)


def job_rows(pg_url: str, sweep_id: str):
    with database.session_scope(pg_url) as s:
        return s.execute(
            select(Job.id, Job.status, Job.attempts, Job.worker, Job.error).where(Job.sweep_id == sweep_id)
        ).all()


def prepare_tasks(broker: str, host: str) -> list[dict]:
    """The prepare tasks waiting on a host's queue, oldest first (kombu's Redis list: newest at the left)."""
    out = []
    for raw in reversed(redis.Redis.from_url(broker).lrange(host_queue(host), 0, -1)):
        msg = json.loads(raw)
        assert msg["headers"]["task"] == TASK_PREPARE_ENV
        out.append(json.loads(base64.b64decode(msg["body"]))[0][0])
    return out
