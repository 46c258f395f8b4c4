"""No sleep while a job runs: a power assertion held from job start to job end.

macOS: ``caffeinate -i -s -w <worker pid>`` (prevent idle sleep, and system sleep on AC power; the
assertion also ends by itself if the worker dies, through ``-w``). Linux: ``systemd-inhibit
--what=idle:sleep`` around ``tail --pid=<worker pid>`` where logind answers; elsewhere nothing, and
the worker's log says so once. The holder runs in its own process group, stopped at job end.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

log = logging.getLogger(__name__)
WHO = "siliconbench"


@dataclass(frozen=True)
class SleepAssertion:
    method: str  # "caffeinate" | "systemd-inhibit" | "none"
    detail: str  # the command held, or why nothing is
    pid: int | None = None  # the holder process while the job runs


def sleep_command(system: str, worker_pid: int, reason: str) -> list[str] | None:
    """The command that holds the assertion on ``system`` for as long as it runs (pure)."""
    if system == "Darwin":
        return ["caffeinate", "-i", "-s", "-w", str(worker_pid)]
    if system == "Linux":
        return [
            "systemd-inhibit",
            "--what=idle:sleep",
            f"--who={WHO}",
            f"--why={reason}",
            "--mode=block",
            "tail",
            f"--pid={worker_pid}",
            "-f",
            "/dev/null",
        ]
    return None


@lru_cache(maxsize=8)
def _usable(system: str, tool: str | None) -> tuple[str, str]:
    """(method, why) once per process and tool found on PATH; logged once."""
    if system not in ("Darwin", "Linux"):
        method, why = "none", f"no sleep prevention on {system}"
    elif tool is None:
        method, why = "none", f"{'caffeinate' if system == 'Darwin' else 'systemd-inhibit'} not found on PATH"
    elif system == "Darwin":
        method, why = "caffeinate", tool
    else:  # systemd-inhibit needs logind on the system bus; containers often have neither
        try:
            r = subprocess.run(
                [tool, "--what=idle:sleep", f"--who={WHO}", "--why=probe", "--mode=block", "true"],
                capture_output=True,
                text=True,
                timeout=5,
            )
            ok, said = r.returncode == 0, (r.stderr or r.stdout).strip()
        except (OSError, subprocess.SubprocessError) as exc:
            ok, said = False, str(exc)
        method, why = ("systemd-inhibit", tool) if ok else ("none", f"systemd-inhibit cannot take a lock here: {said}")
    log.info("sleep prevention while a job runs: %s (%s)", method, why)
    return method, why


def sleep_method(system: str | None = None) -> tuple[str, str]:
    """What ``prevent_sleep`` will use here: (method, detail)."""
    system = system or platform.system()
    return _usable(system, shutil.which("caffeinate" if system == "Darwin" else "systemd-inhibit"))


def _stop(proc: subprocess.Popen) -> int | None:
    """Stop the holder's process group; its return code if it had already ended on its own."""
    ended = proc.poll()
    if ended is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    return ended


@contextlib.contextmanager
def prevent_sleep(reason: str, *, system: str | None = None) -> Iterator[SleepAssertion]:
    """Hold a sleep assertion for the block; yields what is held (method "none" when nothing can be)."""
    system = system or platform.system()
    method, why = sleep_method(system)
    cmd = sleep_command(system, os.getpid(), reason) if method != "none" else None
    if cmd is None:
        yield SleepAssertion("none", why)
        return
    try:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
    except OSError as exc:  # the job runs anyway; the machine may sleep
        log.warning("could not start %s: %s", cmd[0], exc)
        yield SleepAssertion("none", f"{cmd[0]} failed to start: {exc}")
        return
    try:
        yield SleepAssertion(method, " ".join(cmd), proc.pid)
    finally:
        ended = _stop(proc)
        if ended is not None:
            log.warning("the sleep assertion (%s) ended during the job with status %s", cmd[0], ended)
