"""Settings from the environment, validated at start-up; every field says what it is for.

Every ``SILICONBENCH_*`` variable any part of the project reads — the CLI, the worker and its job's child, the
coordinator, the dashboard, the scripts, compose, the test harness — is a field here, and docs/settings.md's settings
table lists each one (tests/house/test_readme.py holds both to it). Code that reads one variable alone (an
import-time constant, a job's child) reads it through ``env_setting``, with the field's type, bounds and default.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, TypeAdapter, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from .errors import UserError


def data_dir() -> Path:
    """The user's data directory for siliconbench (where the embedded SQLite file lives)."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "siliconbench"


def llama_tools_dir(llama_cpp_python: str) -> Path:
    """Where llama.cpp's own tools (llama-bench, llama-server, ...) are for a llama-cpp-python version: the setting,
    else where scripts/build_llama_tools.sh builds them from that version's vendored tree (its tools cache)."""
    configured = env_setting("llama_tools_dir")
    if configured:
        return Path(configured).expanduser()
    return tools_cache_dir() / f"llama.cpp-{llama_cpp_python}" / "bin"


def tools_cache_dir() -> Path:
    """scripts/build_llama_tools.sh's cache: the llama-cpp-python sdists, their vendored trees and the tools built."""
    return Path(env_setting("tools_cache") or Path.home() / ".cache/siliconbench/tools").expanduser()


DURABLE_AFTER_S = 1.0  # durable_after_s's default: a worker's WorkerContext has it without loading Settings
BUSY_CPU_PCT = 25.0  # busy_cpu_pct's default, read by the busy gate (siliconbench/worker/measure/busy.py) at each job


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SILICONBENCH_", extra="ignore")

    database_url: str | None = Field(
        None, description="SQLAlchemy URL (postgresql+psycopg://...). Unset: the embedded SQLite file in the data dir."
    )
    models_dir: Path | None = Field(None, description="Folder of models with manifests. Unset: <data dir>/models.")
    broker_url: str | None = Field(None, description="Redis URL of the Celery broker. Unset: sweeps run in-process.")
    spool_dir: Path | None = Field(None, description="Where a worker keeps results it could not write yet.")
    keep_samples_days: float | None = Field(
        None,
        ge=0,
        description="`siliconbench db prune` deletes raw samples of results older than this many days "
        "once their summaries are stored (never a result, nor a finding's evidence). Unset: keep them forever.",
    )
    # Dashboard login (OpenID Connect through Streamlit's st.login); siliconbench.contract.dashboard_access has the rule.
    oidc_metadata_url: str | None = Field(
        None, description="The provider's discovery document (https://issuer/.well-known/openid-configuration)."
    )
    oidc_client_id: str | None = Field(None, description="The dashboard's client id at the OpenID provider.")
    oidc_client_secret: SecretStr | None = Field(None, description="The dashboard's client secret at the provider.")
    oidc_redirect_uri: str | None = Field(
        None, description="Where the provider sends the browser back: the dashboard's URL + /oauth2callback."
    )
    oidc_cookie_secret: SecretStr | None = Field(
        None, description="Signs the login cookie. Unset: a random one per start (logins end at a restart)."
    )
    package_index: str = Field(
        "https://pypi.org/simple",
        description="Where a watch asks for new engine releases unless it names its own "
        "`index:`: a simple-index URL (PEP 503/691) or a local folder of wheels (pip's --find-links).",
    )
    watch_tick_s: float = Field(
        60.0,
        gt=0,
        description="`siliconbench scheduler`: seconds between the watch's ticks (Celery beat): each "
        "checks the due watches, steps the campaigns and delivers notifications.",
    )
    llama_tools_dir: Path | None = Field(
        None,
        description="Folder of llama.cpp's own tools (llama-imatrix, llama-quantize, ...). Unset: where "
        "scripts/build_llama_tools.sh puts them, ~/.cache/siliconbench/tools/llama.cpp-<version>/bin.",
    )
    busy_cpu_pct: float = Field(
        BUSY_CPU_PCT,
        ge=0,
        le=100,
        description="The busy gate's threshold: other processes' CPU, as a share "
        "of all cores, above which the host is busy before a job and a job is marked contended (siliconbench/worker/measure/busy.py). "
        "100 turns the CPU test off (a machine that runs several workers on purpose, as the test suite does)",
    )
    database_pooled: bool = Field(
        False,
        description="The database URL leads to a transaction pooler (PgBouncer, pool_mode = transaction), as a "
        "fleet of more than ~80 Macs needs: no server-side prepared statements. Set it on the workers that "
        "connect through the pooler; the coordinator connects directly (docs/fleet.md).",
    )
    durable_after_s: float = Field(
        DURABLE_AFTER_S,
        ge=0,
        description="A worker holds a result back for the database's disk flush before "
        "acking its job only if the job ran at least this long (0: every result); a shorter job's result, lost in "
        "a database crash, is run again by the reconciler.",
    )
    dashboard_read_only: bool = Field(
        False, description="Offer no write action (submit, cancel, scan, confirm) to anyone, logged in or not."
    )
    # The fleet worker (`siliconbench worker` sets the first three from its options).
    worker_name: str | None = Field(None, description="The worker's name in the fleet (`siliconbench worker --name`).")
    worker_engines: str | None = Field(
        None, description="Comma-separated engines this worker offers (`--engines mlx`). Unset: every installed one."
    )
    worker_extra_queues: str = Field(
        "", description="Comma-separated further Celery queues the worker consumes (the plumbing benchmark's)."
    )
    log_level: str = Field("INFO", description="Celery's log level for `siliconbench worker` and `scheduler`.")
    lease_s: float = Field(
        30.0,
        gt=0,
        description="A running job's lease in the database; the worker renews it every third. The same "
        "on every machine of a fleet (tests of crash recovery shorten it).",
    )
    heartbeat_s: float = Field(
        5.0,
        gt=0,
        description="How often a worker writes its heartbeat (and notices the database back, and writes "
        "spooled results); capped at half of the online window.",
    )
    env_file: Path | None = Field(
        None,
        description="A file of KEY=value settings with passwords that `worker install` wrote (mode 0600): "
        "launchd cannot pass them, so the service names the file.",
    )
    envs_dir: Path | None = Field(
        None, description="Where engine environments (`siliconbench env add`) live. Unset: <data dir>/envs."
    )
    wheel_cache: Path | None = Field(
        None,
        description="The wheel cache the bootstrap fills (llama-cpp-python built once) and `env add` looks in. "
        "Unset: ~/.cache/siliconbench/wheels.",
    )
    tools_cache: Path | None = Field(
        None,
        description="Where scripts/build_llama_tools.sh builds llama.cpp's own tools (and keeps the sdist). "
        "Unset: ~/.cache/siliconbench/tools.",
    )
    builds_dir: Path | None = Field(
        None,
        description="Where `siliconbench env add llama.cpp --source` keeps llama.cpp builds: one incremental build "
        "tree per source and build options, and each commit's libraries and tools. Unset: "
        "~/.cache/siliconbench/llama-builds.",
    )
    llama_source: Path | None = Field(
        None,
        description="This worker's llama.cpp git checkout: a tags watch's builds and bisection steps sent to it are "
        "made from here instead of the path the watch names (a Mac whose clone lives elsewhere). Unset: the "
        "watch's path, `~` expanded on this machine.",
    )
    llama_build: Path | None = Field(
        None,
        description="Set by the worker in a job's child, not by hand: the llama.cpp build (its folder under "
        "builds_dir) the job runs on (siliconbench/worker/builds/driver.py).",
    )
    mlx_blas: str | None = Field(
        None,
        description="Set by the worker in an MLX job's child, not by hand: the BLAS it preloaded, recorded "
        "with the result (siliconbench/worker/envs/blas.py).",
    )
    webhook_secret: SecretStr | None = Field(
        None, description="Signs every webhook body (HMAC-SHA256, X-Siliconbench-Signature). Unset: nothing is sent."
    )
    # Read by the scripts and compose, not by Python: listed so that one table names every variable.
    venv: Path | None = Field(None, description="scripts/bootstrap.sh: the virtual environment it makes. Unset: .venv.")
    extras: str | None = Field(
        None,
        description="scripts/bootstrap.sh: the extras it installs. Unset: llamacpp,mlx,models,postgres,dashboard,dev.",
    )
    bind: str | None = Field(
        None,
        description="compose.yaml: the address Redis and PostgreSQL publish their ports on (the LAN address "
        "the Macs reach). Unset: 127.0.0.1.",
    )
    # The test harness and the tests.
    fault: str | None = Field(
        None, description="Testing: a fault a job's child injects after loading the model (crash | hang | error)."
    )
    throttle: float | None = Field(
        None, ge=0, description="Testing (harness/throttle): slow every timed engine call by this fraction."
    )
    throttle_when: str | None = Field(
        None,
        description="Testing (harness/throttle): only when the child's engine package is this version "
        "(PACKAGE==VERSION).",
    )
    chromium: Path | None = Field(None, description="Testing: the Chromium the browser tests drive. Unset: Debian's.")
    test_models_dir: Path | None = Field(
        None,
        description="Testing: where the tests keep the models they make once per machine. Unset: "
        "~/.cache/siliconbench/test-models.",
    )
    test_envs_dir: Path | None = Field(
        None,
        description="Testing: where the tests keep the second mlx-lm release's environment. Unset: "
        "~/.cache/siliconbench/test-envs.",
    )
    update_screenshot: bool = Field(
        False, description="Testing: the browser test writes the journey's Compare page to docs/compare.png."
    )
    test_pg_url: str | None = Field(
        None,
        description="Testing: the PostgreSQL admin URL the tests make databases with. Unset: "
        "postgresql://postgres@127.0.0.1:5432/postgres.",
    )

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        path = data_dir() / "siliconbench.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{path}"

    @property
    def resolved_models_dir(self) -> Path:
        return (self.models_dir or data_dir() / "models").expanduser()

    @property
    def embedded(self) -> bool:
        return not self.broker_url


def env_setting(name: str):
    """Setting ``name`` read now from its variable alone, with the field's type, bounds and default: for an
    import-time constant or a process that must not fail on another variable. UserError naming it when invalid."""
    field = Settings.model_fields[name]
    var = f"SILICONBENCH_{name.upper()}"
    raw = os.environ.get(var)
    if raw is None or raw == "":
        return field.default
    try:
        kind = Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation
        return TypeAdapter(kind).validate_python(raw)
    except ValidationError as exc:
        raise UserError(var, exc.errors()[0]["msg"]) from None


def load_settings(**overrides) -> Settings:
    """Settings from SILICONBENCH_* variables; a bad value exits with the variable's name."""
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        var = "SILICONBENCH_" + str(err["loc"][0]).upper()
        raise UserError(var, err["msg"]) from None
