"""What a worker on this machine would see, each fact a check with what to fix (`siliconbench doctor`).

Host facts, the engines and the backend each would run on (probed in a fresh interpreter, as a job's
child is), Metal, sleep prevention, the service, thermal state and power (worker.platform), and the
broker and database reachable within a few seconds. On Linux no Metal is expected and is not a failure.
"""

from __future__ import annotations

import importlib
import json
from importlib.metadata import version
import platform
import subprocess
import sys
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import redis
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine
from sqlalchemy.exc import DBAPIError, NoSuchModuleError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from siliconbench.errors import UserError
from siliconbench.manifest import ModelCatalog
from storage.database import head_revision, normalize_url, shown
from storage.roles import identity

from worker.engines import installed_engines
from worker.platform.host_facts import host_facts
from worker.service import installed, sleep_method

PROBE_TIMEOUT_S = 120  # importing an engine, cold, on a slow disk
_HOST_KEYS = ("hostname", "chip", "cores", "memory_bytes", "os_version", "machine", "python", "os")


class Status(str, Enum):
    ok = "ok"
    info = "info"  # not a problem, worth knowing (no Metal on Linux, no broker configured)
    fail = "FAIL"


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


def hide_password(url: str) -> str:
    """A URL for output: the password replaced by ***."""
    try:
        parts = urlsplit(url)
        if parts.password:
            user = parts.username or ""
            host = parts.hostname or ""
            port = f":{parts.port}" if parts.port else ""
            return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))
    except ValueError:
        pass
    return url


# ------------------------------------------------------------------------------------------------ host


def _rosetta() -> bool:
    try:
        out = subprocess.run(["sysctl", "-n", "sysctl.proc_translated"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() == "1"
    except (OSError, subprocess.SubprocessError):
        return False


def check_host(system: str) -> list[Check]:
    f = host_facts()
    detail = (f"{f['hostname']} · {f['chip']} · {f['cores']} cores · {f['memory_bytes'] / 2**30:.1f} GiB · "
              f"{f['os_version']} · {f['machine']} · Python {f['python']}")
    extra = {k: v for k, v in f.items() if k not in _HOST_KEYS}
    if extra:
        detail += " · " + ", ".join(f"{k}={v}" for k, v in extra.items())
    if system == "Darwin" and (f["machine"] != "arm64" or _rosetta()):
        return [Check("host", Status.fail, detail + " (not native arm64: Rosetta or an Intel Python)",
                      "install a native arm64 Python 3.11+ (python.org, or Homebrew under /opt/homebrew) and "
                      "reinstall siliconbench with it: no mlx wheel exists for x86_64 and llama.cpp gets no Metal")]
    return [Check("host", Status.ok, detail)]


# --------------------------------------------------------------------------------------------- engines

_PROBE = "import json, sys; from worker.runtime.doctor import probe_engine; print(json.dumps(probe_engine(sys.argv[1])))"


def probe_engine(name: str) -> dict:
    """The backend an engine would use here (run in a fresh interpreter: it imports the engine)."""
    if name == "llama.cpp":
        from worker.engines.llama_cpp import build_info  # the engine, optional on this host (probed in its own interpreter)

        info = build_info()
        sysinfo = info.get("system_info", "").upper()
        offload = info.get("gpu_offload") == "True"
        backend = "Metal" if offload and "METAL" in sysinfo else "CUDA" if offload and "CUDA" in sysinfo else "CPU"
        return {"version": version("llama-cpp-python"), "backend": backend, "gpu_offload": offload,
                "build": info.get("commit") or info.get("version") or ""}
    if name == "mlx":
        import mlx.core as mx  # the engine, optional on this host (probed in its own interpreter)

        metal = bool(mx.metal.is_available())
        out = {"version": version("mlx-lm"), "mlx": version("mlx"), "device": str(mx.default_device()),
               "backend": "Metal" if metal and "gpu" in str(mx.default_device()).lower() else "CPU",
               "gpu_offload": metal}
        if metal:
            dev = (mx.device_info() if hasattr(mx, "device_info") else mx.metal.device_info())
            out["gpu"] = str(dev.get("device_name") or dev.get("architecture") or "")
        return out
    raise ValueError(f"unknown engine {name!r}")


def _probe(name: str) -> tuple[dict | None, str]:
    try:
        r = subprocess.run([sys.executable, "-c", _PROBE, name], capture_output=True, text=True,
                           timeout=PROBE_TIMEOUT_S, cwd=Path(__file__).resolve().parents[2])
    except subprocess.TimeoutExpired:
        return None, f"importing it took over {PROBE_TIMEOUT_S} s"
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        return None, tail
    return json.loads(r.stdout.strip().splitlines()[-1]), ""


_METAL_FIX = {
    "llama.cpp": "reinstall llama-cpp-python with Metal, natively on arm64: "
                 "CMAKE_ARGS='-DGGML_METAL=on' pip install --force-reinstall --no-cache-dir llama-cpp-python",
    "mlx": "install mlx with a native arm64 Python (`pip install mlx mlx-lm`): "
           "an x86_64 or Rosetta Python gets no Metal",
}


def check_engines(system: str) -> list[Check]:
    found = installed_engines()
    if not found:
        return [Check("engines", Status.fail, "neither llama.cpp nor MLX is installed",
                      "pip install 'siliconbench[llamacpp,mlx]' (or scripts/bootstrap.sh)")]
    checks, gpu = [], {}
    for name in found:
        probe, why = _probe(name)
        if probe is None:
            packages = "llama-cpp-python" if name == "llama.cpp" else "mlx mlx-lm"
            checks.append(Check(name, Status.fail, f"{name} {found[name]} is installed but does not load: {why}",
                                f"reinstall it: pip install --force-reinstall {packages}"))
            continue
        gpu[name] = probe["backend"]
        build = f"llama.cpp build {probe.get('build')}" if name == "llama.cpp" else \
            f"mlx {probe.get('mlx')}, device {probe.get('device')}"
        gpu_name = f" · {probe['gpu']}" if probe.get("gpu") else ""
        checks.append(Check(name, Status.ok, f"{probe['version']} · backend {probe['backend']} · {build}{gpu_name}"))
    if system == "Darwin":
        missing = [n for n, b in gpu.items() if b != "Metal"]
        if missing:
            checks.append(Check("metal", Status.fail, f"no Metal for {', '.join(missing)}: it would run on the CPU",
                                "; ".join(_METAL_FIX[n] for n in missing)))
        elif gpu:
            checks.append(Check("metal", Status.ok, f"Metal for {', '.join(gpu)}"))
    elif gpu:
        runs = ", ".join(f"{n} runs on {b}" for n, b in gpu.items())
        checks.append(Check("metal", Status.info, f"Metal exists only on macOS: {runs} here"))
    return checks


# ------------------------------------------------------------------------------------ models, service


def check_models(models_dir: Path) -> list[Check]:
    try:
        names = ModelCatalog(models_dir).names()
    except Exception as exc:  # a broken manifest: the worker would fail to register
        return [Check("models", Status.fail, f"{models_dir}: {exc}".splitlines()[0],
                      "fix or remove that model's manifest.json")]
    if not names:
        return [Check("models", Status.fail, f"no models in {models_dir}: the worker could take no job",
                      "siliconbench models make-tiny (or add-smollm2), or pass --models-dir / SILICONBENCH_MODELS_DIR")]
    return [Check("models", Status.ok, f"{len(names)} in {models_dir}: {', '.join(names)}")]


def check_sleep(system: str) -> list[Check]:
    method, why = sleep_method(system)
    if method != "none":
        return [Check("sleep", Status.ok, f"held while a job runs: {method}")]
    if system == "Darwin":
        return [Check("sleep", Status.fail, f"no sleep prevention: {why}",
                      "caffeinate is part of macOS: put /usr/bin on PATH")]
    return [Check("sleep", Status.info, f"no sleep prevention: {why}")]


def check_service(system: str) -> list[Check]:
    path = installed(system)
    if path:
        return [Check("service", Status.ok, f"installed: {path}")]
    return [Check("service", Status.info, "not installed; to run at login and restart on a crash: "
                  "siliconbench worker install --broker URL --database URL")]


def check_platform() -> list[Check]:
    # Thermal state and power come from worker.platform, built separately: its one call site.
    try:
        host_platform = importlib.import_module(f"{__package__}.platform")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}.platform":
            return [Check("thermal", Status.fail, f"worker.platform does not import: {exc}")]
        return [Check("thermal", Status.info, "thermal state and power not reported yet (no worker.platform)")]
    except Exception as exc:
        return [Check("thermal", Status.fail, f"worker.platform does not import: {type(exc).__name__}: {exc}")]
    report = getattr(host_platform, "report", None)
    if report is None:
        return [Check("thermal", Status.info,
                      "thermal state and power not reported yet (worker.platform has no report())")]
    try:
        rep = report()
    except Exception as exc:
        return [Check("thermal", Status.fail, f"worker.platform.report() failed: {type(exc).__name__}: {exc}")]
    if isinstance(rep, dict):
        detail = ", ".join(f"{k}={v}" for k, v in rep.items())
    elif isinstance(rep, (list, tuple)):
        detail = "; ".join(map(str, rep))
    else:
        detail = str(rep)
    return [Check("thermal", Status.ok, detail)]


# ------------------------------------------------------------------------------------ broker, database


def check_broker(url: str | None, timeout_s: float) -> list[Check]:
    if not url:
        return [Check("broker", Status.info, "not configured (embedded runs need none); a worker needs "
                      "--broker redis://HOST:6379/0 or SILICONBENCH_BROKER_URL")]
    shown = hide_password(url)
    if urlsplit(url).scheme not in ("redis", "rediss"):
        return [Check("broker", Status.fail, f"{shown} is not a Redis URL",
                      "set SILICONBENCH_BROKER_URL=redis://HOST:6379/0")]
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
        try:
            client.ping()
        finally:
            client.close()
    except redis.exceptions.AuthenticationError as exc:
        return [Check("broker", Status.fail, f"{shown} refused the password: {exc}",
                      "use the password the coordinator's Redis requires (its .env) in the broker URL")]
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
        return [Check("broker", Status.fail, f"{shown} unreachable within {timeout_s:g} s: {exc}",
                      "start Redis on the coordinator (`docker compose up -d`) and make sure this machine reaches "
                      "that host and port (the compose ports bind 127.0.0.1 unless SILICONBENCH_BIND says otherwise)")]
    except redis.exceptions.RedisError as exc:
        return [Check("broker", Status.fail, f"{shown}: {exc}", "check the broker URL")]
    return [Check("broker", Status.ok, f"{shown} answers")]


def check_database(url: str | None, timeout_s: float) -> list[Check]:
    if not url:
        return [Check("database", Status.info, "not configured (embedded runs use the SQLite file); a worker needs "
                      "--database postgresql://USER@HOST/siliconbench or SILICONBENCH_DATABASE_URL")]
    try:
        u = normalize_url(url)
    except UserError as exc:
        return [Check("database", Status.fail, exc.message,
                      "set SILICONBENCH_DATABASE_URL=postgresql://USER@HOST/siliconbench")]
    where = shown(u)
    args = {"connect_timeout": max(1, int(round(timeout_s)))} if u.get_backend_name() == "postgresql" else {}
    try:
        engine = create_engine(u, poolclass=NullPool, connect_args=args)
    except (ImportError, NoSuchModuleError) as exc:
        return [Check("database", Status.fail, f"no driver for {where}: {exc}", "pip install 'siliconbench[postgres]'")]
    try:
        with engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
            login = _login_check(conn) if current == head_revision() else []
    except DBAPIError as exc:
        said = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        return [Check("database", Status.fail, f"{where} unreachable within {timeout_s:g} s: {said}",
                      "check host, port, user and password in the URL; PostgreSQL must accept connections from this "
                      "machine (the compose ports bind 127.0.0.1 unless SILICONBENCH_BIND says otherwise)")]
    finally:
        engine.dispose()
    head = head_revision()
    if current is None:
        return [Check("database", Status.fail, f"{where} answers but has no siliconbench tables",
                      "run `siliconbench db upgrade` against it (the compose stack's one-shot migration does)")]
    if current != head:
        return [Check("database", Status.fail,
                      f"{where} is at schema revision {current}, this siliconbench needs {head}",
                      "upgrade siliconbench here, or run `siliconbench db upgrade` there: both at one revision")]
    return [Check("database", Status.ok, f"{where} answers, schema at {head}"), *login]


def _login_check(conn) -> list[Check]:
    with Session(bind=conn) as s:
        who = identity(s)
    if who is None:
        return []
    if who.worker_role:
        return [Check("login", Status.ok if who.host else Status.fail,
                      f"{who.login}, a worker login bound to host {who.host!r}" if who.host else
                      f"{who.login} is a worker login with no host bound to it in this database",
                      "" if who.host else "on the coordinator: `siliconbench db worker-role HOST`")]
    return [Check("login", Status.info, f"{who.login} is not a worker login: it may change every table",
                  "give this Mac its own: `siliconbench db worker-role HOST` on the coordinator, and use its URL")]


def run_checks(*, broker_url: str | None, database_url: str | None, models_dir: Path,
               timeout_s: float = 3.0, system: str | None = None) -> list[Check]:
    """Every check, in the order printed."""
    system = system or platform.system()
    return [*check_host(system), *check_engines(system), *check_models(models_dir), *check_sleep(system),
            *check_platform(), *check_service(system), *check_broker(broker_url, timeout_s),
            *check_database(database_url, timeout_s)]
