"""The fleet tests' fixtures: a PostgreSQL database of the test's own, this area's Redis database, real worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.fleet import WorkerProc
from tests.conftest import new_pg_database
from tests.fleet.support import HEARTBEAT_S, LEASE_S, worker_login


@pytest.fixture
def pg_url():
    """A PostgreSQL database at head of this test's own (a copy of the run's migrated template)."""
    with new_pg_database("sb_fleet", migrated=True) as url:
        yield url


@pytest.fixture
def broker_url(private_broker):
    """The fleet's broker: a Redis of this test's own (conftest.private_broker), so no other test can drop its queues."""
    return private_broker


@pytest.fixture
def workers(tmp_path, pg_url, broker_url):
    started: list[WorkerProc] = []

    def start(
        name: str, models: Path, *, broker: str | None = None, database_url: str | None = None, **kw
    ) -> WorkerProc:
        env = {"SILICONBENCH_LEASE_S": LEASE_S, "SILICONBENCH_HEARTBEAT_S": HEARTBEAT_S, **kw.pop("env", {})}
        w = WorkerProc(
            name,
            broker=broker or broker_url,
            database=worker_login(pg_url, name, database_url),
            models_dir=models,
            log_dir=tmp_path,
            env=env,
            **kw,
        )
        started.append(w)
        return w.wait_ready()

    yield start
    for w in started:
        w.stop()
