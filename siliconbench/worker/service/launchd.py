"""The worker as a macOS LaunchAgent: the plist (pure) and launchctl bootstrap / bootout.

Keys from launchd.plist(5): ``ProcessType=Interactive`` ("the same resource limitations as apps, that is
to say, none"; left unspecified, launchd "will apply light resource limits to the job, throttling its CPU
usage and I/O bandwidth", which would skew every figure); ``KeepAlive`` true restarts it whatever
ended it, at most every ``ThrottleInterval`` s; ``ExitTimeOut`` is the wait between SIGTERM and SIGKILL
when the job is stopped (0 would mean forever and can stall shutdown, so it is always set).

A LaunchAgent runs in the user's GUI session (``gui/<uid>``): on a headless Mac mini, turn on automatic
login for that user so the worker starts at boot.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess

from siliconbench.worker.service.spec import LABEL, ServiceError, ServiceSpec

THROTTLE_INTERVAL_S = 10  # launchd's default respawn spacing, written out so it is visible


def build_plist(spec: ServiceSpec) -> dict:
    """The LaunchAgent's property list for ``spec`` (a dict for plistlib)."""
    p = spec.paths
    return {
        "Label": spec.label,
        "ProgramArguments": list(spec.program),
        "RunAtLoad": True,
        "KeepAlive": True,
        "ProcessType": "Interactive",
        "ThrottleInterval": THROTTLE_INTERVAL_S,
        "ExitTimeOut": spec.stop_timeout_s,
        "EnvironmentVariables": dict(spec.environment),
        "WorkingDirectory": str(p.working_dir),
        "StandardOutPath": str(p.stdout_log),
        "StandardErrorPath": str(p.stderr_log),
    }


def render(spec: ServiceSpec) -> bytes:
    return plistlib.dumps(build_plist(spec), fmt=plistlib.FMT_XML, sort_keys=False)


def domain() -> str:
    return f"gui/{os.getuid()}"


def _launchctl(timeout_s: float, *args: str) -> subprocess.CompletedProcess:
    # bootout waits for the worker to exit, i.e. for its running job (up to ExitTimeOut).
    return subprocess.run(["launchctl", *args], capture_output=True, text=True, timeout=timeout_s + 60)


def load(spec: ServiceSpec) -> list[str]:
    """Bootstrap the agent (booting out an older copy first); the lines to print."""
    target = f"{domain()}/{spec.label}"
    if shutil.which("launchctl") is None:
        return [f"launchctl not found: load it with `launchctl bootstrap {domain()} {spec.paths.service_file}`"]
    # An older copy, if any, goes first (after its running job); none loaded is fine. Then enable: bootstrap
    # refuses a label left disabled by an earlier `launchctl disable`.
    _launchctl(spec.stop_timeout_s, "bootout", target)
    _launchctl(spec.stop_timeout_s, "enable", target)
    done = _launchctl(spec.stop_timeout_s, "bootstrap", domain(), str(spec.paths.service_file))
    if done.returncode != 0:
        raise ServiceError(
            f"`launchctl bootstrap {domain()} {spec.paths.service_file}` failed ({done.returncode}): "
            f"{(done.stderr or done.stdout).strip()}. A LaunchAgent needs the user logged in at the console "
            "(on a headless Mac mini: System Settings > Users & Groups > Automatic login)."
        )
    return [f"loaded {target} (launchctl print {target} shows its state; logs: {spec.paths.stderr_log})"]


def unload(stop_timeout_s: float) -> list[str]:
    target = f"{domain()}/{LABEL}"
    if shutil.which("launchctl") is None:
        return ["launchctl not found: nothing to unload"]
    done = _launchctl(stop_timeout_s, "bootout", target)
    if done.returncode == 0:
        return [f"booted out {target} (after its running job finished)"]
    return [f"{target} was not loaded ({(done.stderr or done.stdout).strip() or done.returncode})"]


def forget() -> None:
    """After the plist is removed: nothing (bootout already dropped the label)."""
