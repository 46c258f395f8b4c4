"""Settings from the environment, validated at start-up; every field says what it is for."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from .errors import UserError


def data_dir() -> Path:
    """The user's data directory for siliconbench (where the embedded SQLite file lives)."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "siliconbench"


DURABLE_AFTER_S = 1.0  # durable_after_s's default: a worker's WorkerContext has it without loading Settings
BUSY_CPU_PCT = 25.0  # busy_cpu_pct's default, read by the busy gate (worker/measure/busy.py) at each job


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SILICONBENCH_", extra="ignore")

    database_url: str | None = Field(
        None, description="SQLAlchemy URL (postgresql+psycopg://...). Unset: the embedded SQLite file in the data dir.")
    models_dir: Path | None = Field(None, description="Folder of models with manifests. Unset: <data dir>/models.")
    broker_url: str | None = Field(None, description="Redis URL of the Celery broker. Unset: sweeps run in-process.")
    spool_dir: Path | None = Field(None, description="Where a worker keeps results it could not write yet.")
    keep_samples_days: float | None = Field(
        None, ge=0, description="`siliconbench db prune` deletes raw samples of results older than this many days "
        "once their summaries are stored (never a result, nor a finding's evidence). Unset: keep them forever.")
    # Dashboard login (OpenID Connect through Streamlit's st.login); siliconbench.dashboard_access has the rule.
    oidc_metadata_url: str | None = Field(
        None, description="The provider's discovery document (https://issuer/.well-known/openid-configuration).")
    oidc_client_id: str | None = Field(None, description="The dashboard's client id at the OpenID provider.")
    oidc_client_secret: SecretStr | None = Field(None, description="The dashboard's client secret at the provider.")
    oidc_redirect_uri: str | None = Field(
        None, description="Where the provider sends the browser back: the dashboard's URL + /oauth2callback.")
    oidc_cookie_secret: SecretStr | None = Field(
        None, description="Signs the login cookie. Unset: a random one per start (logins end at a restart).")
    package_index: str = Field(
        "https://pypi.org/simple", description="Where a watch asks for new engine releases unless it names its own "
        "`index:`: a simple-index URL (PEP 503/691) or a local folder of wheels (pip's --find-links).")
    watch_tick_s: float = Field(
        60.0, gt=0, description="`siliconbench scheduler`: seconds between the watch's ticks (Celery beat): each "
        "checks the due watches, steps the campaigns and delivers notifications.")
    llama_tools_dir: Path | None = Field(
        None, description="Folder of llama.cpp's own tools (llama-imatrix, llama-quantize, ...). Unset: where "
        "scripts/build_llama_tools.sh puts them, ~/.cache/siliconbench/tools/llama.cpp-<version>/bin.")
    busy_cpu_pct: float = Field(
        BUSY_CPU_PCT, ge=0, le=100, description="The busy gate's threshold: other processes' CPU, as a share "
        "of all cores, above which the host is busy before a job and a job is marked contended (worker/measure/busy.py). "
        "100 turns the CPU test off (a machine that runs several workers on purpose, as the test suite does)")
    durable_after_s: float = Field(
        DURABLE_AFTER_S, ge=0, description="A worker holds a result back for the database's disk flush before "
        "acking its job only if the job ran at least this long (0: every result); a shorter job's result, lost in "
        "a database crash, is run again by the reconciler.")
    dashboard_read_only: bool = Field(
        False, description="Offer no write action (submit, cancel, scan, confirm) to anyone, logged in or not.")

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


def load_settings(**overrides) -> Settings:
    """Settings from SILICONBENCH_* variables; a bad value exits with the variable's name."""
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        var = "SILICONBENCH_" + str(err["loc"][0]).upper()
        raise UserError(var, err["msg"]) from None
