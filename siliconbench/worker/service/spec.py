"""What a worker service runs, for a target OS, as pure data: the launchd and systemd writers render it.

Built from the `siliconbench worker` options the user gave and the environment, for any target
(a Darwin plist is built and checked on Linux too). Values that carry a password never go into the
world-readable plist or unit: they go to the 0600 environment file (envfile.py), and a
``--broker``/``--database`` URL with a password leaves the command line for that file as
SILICONBENCH_BROKER_URL / SILICONBENCH_DATABASE_URL, which `siliconbench worker` reads by default.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from siliconbench.contract.errors import SiliconbenchError
from siliconbench.contract.queues import MAX_JOB_TIMEOUT_S

from siliconbench.worker.service.envfile import ENV_FILE_VAR

LABEL = "org.siliconbench.worker"  # launchd label; the systemd unit is UNIT_NAME
UNIT_NAME = "siliconbench-worker.service"
# SIGTERM -> the worker finishes its running job (Celery warm shutdown) -> exits. A job may run up to
# its sweep's timeout_s (default 900 s); after this the service manager kills it and the lease
# expiry re-enqueues the job (a longer job: `worker install --stop-timeout`).
DEFAULT_STOP_TIMEOUT_S = 900 + 60
# Where macOS keeps pmset, sysctl, ioreg (/usr/sbin) and caffeinate (/usr/bin); launchd's own PATH is short.
BASE_PATH = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin")
# Options whose URL may hold a password, and the variable `siliconbench worker` reads instead.
URL_OPTIONS = {"--broker": "SILICONBENCH_BROKER_URL", "--database": "SILICONBENCH_DATABASE_URL"}
SECRET_WORDS = ("PASSWORD", "SECRET", "TOKEN")


class ServiceError(SiliconbenchError):
    """The service manager refused to load or unload the worker (its own message included)."""


@dataclass(frozen=True)
class ServicePaths:
    service_file: Path  # the plist or the unit
    env_file: Path  # 0600, only written when there is a secret
    stdout_log: Path | None  # launchd only; systemd sends both streams to the journal
    stderr_log: Path | None
    working_dir: Path


@dataclass(frozen=True)
class ServiceSpec:
    target: str  # "Darwin" | "Linux"
    program: list[str]  # ProgramArguments / ExecStart: the siliconbench executable, "worker", options
    environment: dict[str, str]  # written in clear into the plist or unit
    secrets: dict[str, str]  # written to paths.env_file (mode 0600)
    paths: ServicePaths
    stop_timeout_s: int = DEFAULT_STOP_TIMEOUT_S
    label: str = LABEL
    moved: list[str] = field(default_factory=list)  # options taken off the command line into the env file


def service_paths(target: str, home: Path, environ: dict | None = None) -> ServicePaths:
    """Where the service files go for a target OS, under ``home``."""
    environ = os.environ if environ is None else environ
    if target == "Darwin":
        logs = home / "Library" / "Logs" / "siliconbench"
        return ServicePaths(
            service_file=home / "Library" / "LaunchAgents" / f"{LABEL}.plist",
            env_file=home / "Library" / "Application Support" / "siliconbench" / "worker.env",
            stdout_log=logs / "worker.log",
            stderr_log=logs / "worker.err.log",
            working_dir=home,
        )
    if target == "Linux":
        config = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
        return ServicePaths(
            service_file=config / "systemd" / "user" / UNIT_NAME,
            env_file=config / "siliconbench" / "worker.env",
            stdout_log=None,
            stderr_log=None,
            working_dir=home,
        )
    raise ValueError(f"no worker service for {target!r}: Darwin (launchd) or Linux (systemd)")


def siliconbench_command() -> list[str]:
    """How to start siliconbench with this interpreter: its console script beside it, else ``python -m``.

    Not resolved through symlinks: a venv's python must stay the venv's, or its packages are gone.
    """
    exe = Path(sys.executable).absolute()
    script = exe.with_name("siliconbench")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [str(exe), "-m", "siliconbench.cli.main"]


def has_secret(key: str, value: str) -> bool:
    """A password in a URL, a password= parameter, or a variable named like a secret."""
    if any(w in key.upper() for w in SECRET_WORDS) or "password=" in value.lower():
        return True
    try:
        return bool(urlsplit(value).password)
    except ValueError:
        return False


def _path_value(program: list[str], environ: dict, target: str) -> str:
    parts = [str(Path(program[0]).parent)] + environ.get("PATH", "").split(os.pathsep)
    if target == "Darwin":
        parts += list(BASE_PATH)
    return os.pathsep.join(dict.fromkeys(p for p in parts if p))


def make_spec(
    target: str,
    options: list[tuple[str, str]],
    *,
    home: Path,
    environ: dict | None = None,
    program: list[str] | None = None,
    stop_timeout_s: int = DEFAULT_STOP_TIMEOUT_S,
) -> ServiceSpec:
    """The service for ``siliconbench worker <options>`` on ``target`` (pure: nothing is written).

    ``options``: the (flag, value) pairs the user gave, in order, values already absolute where they are
    paths. SILICONBENCH_* variables of ``environ`` travel too (in clear, or to the env file if secret).
    """
    environ = dict(os.environ if environ is None else environ)
    if not 0 < stop_timeout_s <= MAX_JOB_TIMEOUT_S + 600:
        raise ValueError(f"stop timeout {stop_timeout_s} s: between 1 and {MAX_JOB_TIMEOUT_S + 600}")
    paths = service_paths(target, home, environ)
    prefix = list(program or siliconbench_command())
    clear: dict[str, str] = {}
    secrets: dict[str, str] = {}
    for key in sorted(environ):
        if key.startswith("SILICONBENCH_") and key != ENV_FILE_VAR and environ[key] != "":
            value = environ[key]
            if key.endswith("_DIR"):  # the service starts elsewhere (its home): a relative folder would move
                value = str(Path(value).expanduser().absolute())
            (secrets if has_secret(key, value) else clear)[key] = value
    args, moved = ["worker"], []
    for flag, value in options:
        if flag in URL_OPTIONS and has_secret(URL_OPTIONS[flag], value):
            secrets[URL_OPTIONS[flag]] = value  # the option wins over the variable, as on the command line
            clear.pop(URL_OPTIONS[flag], None)
            moved.append(flag)
        else:
            args += [flag, value]
    argv = prefix + args
    env = {"PATH": _path_value(argv, environ, target), "PYTHONUNBUFFERED": "1", **clear}
    if secrets and target == "Darwin":  # launchd has no EnvironmentFile=: the worker loads it itself
        env[ENV_FILE_VAR] = str(paths.env_file)
    return ServiceSpec(
        target=target,
        program=argv,
        environment=env,
        secrets=secrets,
        paths=paths,
        stop_timeout_s=int(stop_timeout_s),
        moved=moved,
    )
