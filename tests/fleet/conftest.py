"""The fleet tests' fixtures: a PostgreSQL database of the test's own, this area's Redis database, real worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from harness.fleet import WorkerProc
from tests.conftest import new_pg_database
from tests.fleet.support import LEASE_S, worker_login


@pytest.fixture
def pg_url():
    """A PostgreSQL database at head of this test's own (a copy of the run's migrated template)."""
    with new_pg_database("sb_fleet", migrated=True) as url:
        yield url


@pytest.fixture
def broker_url():
    url = "redis://127.0.0.1:6379/5"
    redis.Redis.from_url(url).flushdb()
    yield url
    redis.Redis.from_url(url).flushdb()


@pytest.fixture
def workers(tmp_path, pg_url, broker_url):
    started: list[WorkerProc] = []

    def start(name: str, models: Path, *, broker: str | None = None, database_url: str | None = None, **kw) -> WorkerProc:
        env = {"SILICONBENCH_LEASE_S": LEASE_S, **kw.pop("env", {})}
        w = WorkerProc(name, broker=broker or broker_url, database=worker_login(pg_url, name, database_url),
                       models_dir=models, log_dir=tmp_path, env=env, **kw)
        started.append(w)
        return w.wait_ready()

    yield start
    for w in started:
        w.stop()
