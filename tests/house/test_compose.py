"""compose.yaml, checked by Docker Compose's own parser (no Docker engine runs here) and by reading."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from siliconbench.contract.dashboard_access import Writes, check_serving
from siliconbench.contract.settings import Settings

from tests.conftest import in_ci

ROOT = Path(__file__).resolve().parents[2]


def compose_command() -> list[str] | None:
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


@pytest.fixture(scope="module")
def config() -> dict:
    cmd = compose_command()
    if cmd is None:
        if in_ci():
            pytest.fail("neither `docker compose` nor `docker-compose` is installed (.ci/run installs docker-compose)")
        pytest.skip("no docker compose client")
    env = {
        **os.environ,
        "POSTGRES_PASSWORD": "pw-from-env",
        "REDIS_PASSWORD": "redis-pw-from-env",
        "COORDINATOR_PASSWORD": "coord-pw-from-env",
        "POOLED_WORKER_PASSWORD": "pooled-pw-from-env",
    }
    env.pop("SILICONBENCH_BIND", None)
    out = subprocess.run(  # with the pooler's profile: every service, PgBouncer included
        [*cmd, "-f", str(ROOT / "compose.yaml"), "--profile", "pooler", "config"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(out.stdout)


def test_services(config):
    assert {"redis", "postgres", "migrate", "reconciler", "dashboard"} <= set(config["services"])
    assert config["services"]["migrate"]["command"] == ["db", "upgrade"]
    assert "--appendonly" in config["services"]["redis"]["command"]  # queued jobs survive a restart


def test_pgbouncer_pools_transactions_for_the_pooled_login_only_when_asked(config):
    """docs/fleet.md's "More than ~80 Macs": transaction pooling in front of PostgreSQL, the pooled worker login's
    password from .env, and only under the `pooler` profile."""
    bouncer = config["services"]["pgbouncer"]
    assert bouncer["profiles"] == ["pooler"]
    env = bouncer["environment"]
    assert env["POOL_MODE"] == "transaction" and env["DB_USER"] == "sbw_fleet" and env["DB_HOST"] == "postgres"
    assert env["DB_PASSWORD"] == "pooled-pw-from-env"
    assert int(env["MAX_DB_CONNECTIONS"]) < 100 and int(env["MAX_CLIENT_CONN"]) >= 1000
    login = config["services"]["pooled-login"]
    assert login["command"] == ["db", "pooled-worker-role", "--password-env", "POOLED_WORKER_PASSWORD"]
    assert login["profiles"] == ["pooler"] and login["environment"]["POOLED_WORKER_PASSWORD"] == "pooled-pw-from-env"
    assert "pooled-login" in bouncer["depends_on"]
    assert "flower" not in config["services"]  # it needs events and broadcasts, which the workers no longer send


def test_every_port_is_bound_to_loopback_by_default(config):
    for name, svc in config["services"].items():
        for port in svc.get("ports", []):
            text = port if isinstance(port, str) else f"{port.get('host_ip', '')}:{port.get('published')}"
            assert text.startswith("127.0.0.1:"), (name, port)


def test_passwords_come_from_the_env_file_only(config):
    raw = (ROOT / "compose.yaml").read_text()
    assert "pw-from-env" not in raw and not re.search(r"^\s*\w*PASSWORD:\s*(?!\$\{)\S", raw, re.M)
    assert config["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"] == "pw-from-env"
    assert "redis-pw-from-env" in config["services"]["reconciler"]["environment"]["SILICONBENCH_BROKER_URL"]


def test_missing_password_is_an_error_naming_it():
    cmd = compose_command()
    if cmd is None:
        pytest.skip("no docker compose client")
    env = {k: v for k, v in os.environ.items() if k not in ("POSTGRES_PASSWORD", "REDIS_PASSWORD")}
    out = subprocess.run(
        [*cmd, "-f", str(ROOT / "compose.yaml"), "config"], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert out.returncode != 0 and "PASSWORD" in out.stderr


def test_dashboard_is_read_only_unless_a_login_is_configured(config):
    """It listens beyond loopback in its container: without SILICONBENCH_OIDC_* it may serve results only."""
    svc = config["services"]["dashboard"]
    env = svc["environment"]
    assert "postgres:5432" in env["SILICONBENCH_DATABASE_URL"] and "SILICONBENCH_OIDC_CLIENT_SECRET" in env
    host = svc["command"][svc["command"].index("--host") + 1]
    fields = {k.removeprefix("SILICONBENCH_").lower(): v for k, v in env.items() if k.startswith("SILICONBENCH_")}
    assert check_serving(host, Settings(**fields)) is Writes.READ_ONLY


def test_only_the_one_shots_use_the_owners_login(config):
    """Least privilege: the long-running services connect as the coordinator's login (no DDL)."""
    services = config["services"]
    assert services["login"]["command"] == [
        "db",
        "coordinator-role",
        "compose",
        "--password-env",
        "COORDINATOR_PASSWORD",
    ]
    for name in ("migrate", "login"):
        assert services[name]["environment"]["SILICONBENCH_DATABASE_URL"].startswith("postgresql://siliconbench:")
    for name in ("reconciler", "dashboard"):
        url = services[name]["environment"]["SILICONBENCH_DATABASE_URL"]
        assert url == "postgresql://sbc_compose:coord-pw-from-env@postgres:5432/siliconbench", name
        assert "login" in services[name]["depends_on"]
