"""The fault campaign's fleet (benchmarks/faults.py): real processes, killed by the PID we started them with and
put back as an operator's supervisor would (launchd, systemd), plus a watch on the processes they spawn.

Workers, the private Redis and the TCP cut in front of PostgreSQL are harness/fleet.py's; the reconcile
loop and the dashboard are plain CLI subprocesses (its ``CliProc``).
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psutil

from harness.fleet import CliProc, free_port

STARTUP_GRACE_S = 15  # a process without a ready line that exits sooner never got going
MAX_RESTART_BACKOFF_S = 10.0


class Slot:
    """One place in the fleet (a worker, the reconcile loop) and the process in it now.

    After our kill -9 the supervisor starts a new one ``restart_after_s`` later. A process that exits by
    itself is started again too, and counted: before it was ready, a start-up failure (a dependency was down
    as it started: the service manager's restart is the remedy); once ready, a death of its own, which a
    process that outlives its dependencies never has.
    """

    def __init__(self, name: str, spawn: Callable[[], object], ready: Callable[[object], bool] | None = None):
        self.name, self._spawn = name, spawn
        self._ready = ready or (lambda p: time.monotonic() - self.started_at > STARTUP_GRACE_S)
        self.history: list[object] = []  # every process this slot ran
        self.killed_pids: set[int] = set()
        self.startup_failures = 0
        self.died: list[str] = []
        self._restart_at: float | None = None
        self._backoff = 1.0
        self.start()

    def start(self) -> None:
        self.proc, self.started_at, self.was_ready, self._restart_at = self._spawn(), time.monotonic(), False, None
        self.history.append(self.proc)

    def ready(self) -> bool:
        if not self.was_ready and self.proc.alive() and self._ready(self.proc):
            self.was_ready, self._backoff = True, 1.0
        return self.was_ready and self.proc.alive()

    def kill9(self, restart_after_s: float) -> int | None:
        """SIGKILL the process in the slot (by its PID); None if none is alive now."""
        if self._restart_at is not None or not self.proc.alive():
            return None
        self.proc.kill9()
        self.killed_pids.add(self.proc.pid)
        self._restart_at = time.monotonic() + restart_after_s
        return self.proc.pid

    def tick(self) -> None:
        now = time.monotonic()
        self.ready()
        if self._restart_at is None and not self.proc.alive():  # exited by itself
            tail = self.proc.logs()[-600:].strip().replace("\n", " | ")
            if self.was_ready:
                self.died.append(f"{self.name} pid {self.proc.pid} rc {self.proc.proc.returncode}: {tail}")
            else:
                self.startup_failures += 1
            self._restart_at, self._backoff = now + self._backoff, min(self._backoff * 2, MAX_RESTART_BACKOFF_S)
        if self._restart_at is not None and now >= self._restart_at:
            self.proc.stop()
            self.start()

    def stop(self) -> None:
        self.proc.stop()


class ChildWatch:
    """Every process the workers spawned (job children, engine servers), by (pid, start time), so that the ones
    a killed worker left behind can be found later (psutil: /proc on Linux, sysctl on macOS)."""

    def __init__(self):
        self.seen: dict[tuple[int, float], tuple[int, str]] = {}  # (pid, created) -> (worker pid, command)

    def scan(self, worker_pids: list[int]) -> list[int]:
        """Record the live descendants of these workers; returns the workers that have one now."""
        busy = []
        for wpid in worker_pids:
            try:
                kids = psutil.Process(wpid).children(recursive=True)
            except psutil.Error:
                continue
            for k in kids:
                try:
                    self.seen.setdefault((k.pid, k.create_time()), (wpid, " ".join(k.cmdline())[:160]))
                except psutil.Error:
                    continue
            busy += [wpid] if kids else []
        return busy

    def alive_of(self, worker_pids: set[int]) -> list[tuple[int, int, str]]:
        """(pid, worker pid, command) of recorded descendants of these workers that still run."""
        out = []
        for (pid, created), (wpid, cmd) in self.seen.items():
            if wpid not in worker_pids:
                continue
            try:
                if abs(psutil.Process(pid).create_time() - created) < 0.01:
                    out.append((pid, wpid, cmd))
            except psutil.Error:
                pass
        return out


def dashboard(env: dict, log_dir: Path) -> tuple[CliProc, str]:
    """`siliconbench dashboard` on a free port; returns it and its base URL."""
    port = free_port()
    return CliProc("dashboard", ["dashboard", "--port", str(port)], env, log_dir), f"http://127.0.0.1:{port}"


def get(url: str, timeout_s: float = 5) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            return r.status, r.read(4096).decode(errors="replace")
    except OSError as exc:
        return 0, str(exc)
