"""The worker as an OS service (LaunchAgent on macOS, systemd user unit on Linux) and sleep prevention.

``install`` writes the service file for this OS (and the 0600 environment file when a setting carries a
password), then loads it; ``uninstall`` stops it and removes both. The writers are pure functions of a
``ServiceSpec`` built for a target OS, so the Darwin plist is built and checked anywhere.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from types import ModuleType

from siliconbench.contract.queues import MAX_JOB_TIMEOUT_S

from siliconbench.worker.service import envfile, launchd, systemd
from siliconbench.worker.service.sleep import SleepAssertion, prevent_sleep, sleep_method
from siliconbench.worker.service.spec import (
    DEFAULT_STOP_TIMEOUT_S,
    LABEL,
    UNIT_NAME,
    ServiceError,
    ServicePaths,
    ServiceSpec,
    make_spec,
    service_paths,
)

# launchd and systemd, chosen once by OS name; both expose render(spec), load(spec), unload(timeout), forget().
_MANAGERS: dict[str, ModuleType] = {"Darwin": launchd, "Linux": systemd}


def manager(target: str) -> ModuleType:
    if target not in _MANAGERS:
        raise ServiceError(f"no worker service for {target}: macOS (launchd) and Linux (systemd) only")
    return _MANAGERS[target]


def install(
    options: list[tuple[str, str]],
    *,
    start: bool = True,
    target: str | None = None,
    home: Path | None = None,
    environ: dict | None = None,
    stop_timeout_s: int = DEFAULT_STOP_TIMEOUT_S,
) -> list[str]:
    """Write the service running ``siliconbench worker <options>`` and (with ``start``) load it; lines to print."""
    target = target or platform.system()
    mgr = manager(target)
    spec = make_spec(target, options, home=home or Path.home(), environ=environ, stop_timeout_s=stop_timeout_s)
    p = spec.paths
    p.service_file.parent.mkdir(parents=True, exist_ok=True)
    for log_path in (p.stdout_log, p.stderr_log):
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.service_file.with_name(p.service_file.name + ".tmp")
    tmp.write_bytes(mgr.render(spec))
    tmp.chmod(0o644)
    os.replace(tmp, p.service_file)
    lines = [f"wrote {p.service_file}"]
    if spec.secrets:
        envfile.write(p.env_file, spec.secrets)
        lines.append(
            f"wrote {p.env_file} (mode 0600): {', '.join(spec.secrets)} "
            "(they carry passwords, so they are not in the service file)"
        )
        if spec.moved:
            lines.append(f"{' and '.join(spec.moved)} went into that file, off the command line")
    else:
        p.env_file.unlink(missing_ok=True)  # a stale one from an earlier install
    if start:
        lines += mgr.load(spec)
    elif target == "Darwin":
        lines.append(f"not loaded (--no-start): launchctl bootstrap gui/{os.getuid()} {p.service_file}")
    else:
        lines.append(
            f"not loaded (--no-start): systemctl --user daemon-reload && systemctl --user enable --now {UNIT_NAME}"
        )
    return lines


def uninstall(
    *, stop: bool = True, target: str | None = None, home: Path | None = None, environ: dict | None = None
) -> list[str]:
    """Stop the service (after its running job) and remove its files; lines to print."""
    target = target or platform.system()
    mgr = manager(target)
    p = service_paths(target, home or Path.home(), environ)
    had = p.service_file.exists()
    # The manager enforces the installed stop timeout itself; this only bounds our wait for it.
    lines = mgr.unload(MAX_JOB_TIMEOUT_S) if stop else []
    for f in (p.service_file, p.env_file):
        if f.exists():
            f.unlink()
            lines.append(f"removed {f}")
    if stop:
        mgr.forget()
    if not had:
        lines.append(f"no worker service was installed here ({p.service_file} absent)")
    return lines


def installed(target: str | None = None, home: Path | None = None) -> Path | None:
    """The service file if a worker service is installed here."""
    target = target or platform.system()
    if target not in _MANAGERS:
        return None
    f = service_paths(target, home or Path.home()).service_file
    return f if f.exists() else None


__all__ = [
    "install",
    "uninstall",
    "installed",
    "prevent_sleep",
    "sleep_method",
    "SleepAssertion",
    "make_spec",
    "service_paths",
    "ServiceSpec",
    "ServicePaths",
    "ServiceError",
    "LABEL",
    "UNIT_NAME",
    "envfile",
    "launchd",
    "systemd",
]
