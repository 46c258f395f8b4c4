"""A server process on 127.0.0.1, from spawn to a group that is gone: started in its own process group,
ready when it answers a 1-token completion, stopped with SIGTERM then SIGKILL, and never left behind.

Readiness means the model is loaded: the probe is a 1-token completion, not /health. llama_cpp.server loads
the model before it binds (its /v1/models answers only then), but mlx_lm.server binds at once and loads the
model at start-up in its generation thread, and its /health answers 200 during the load (it reports only
that the thread is alive); a completion request sent meanwhile waits in its queue until the model is loaded.

Each server runs in its own process group, so stopping it takes every process it started. Every spawn
is announced (``on_spawn``) so that the job runner can kill the group if the job's own process dies
before it could; `kill_live_groups` lets a dying job process do the same. What command starts which server
is ``servers.py``'s table.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from siliconbench.contract.errors import WorkloadError

from siliconbench.worker.serving.client import answers_completion

READY_PROBE = "POST /v1/completions (1 token, non-streaming) answered with HTTP 200"
POLL_S = 0.02  # readiness poll while the port refuses: fine enough for start times of ~1 s
HOST = "127.0.0.1"
LOG_TAIL_CHARS = 1500
_LIVE: dict[int, Server] = {}  # pgid -> server not yet stopped, for last-resort cleanup


class ServerError(WorkloadError):
    """A server could not be used: port in use, exited at start, never ready. The job fails with this reason."""

    def __init__(self, message: str, log_tail: str | None = None):
        super().__init__(message)
        self.log_tail = log_tail  # the server's own output, kept as the failed job's stderr tail


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT of our own last server is no conflict
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False


class Server:
    def __init__(
        self,
        engine: str,
        cmd: list[str],
        port: int,
        log_path: Path,
        on_spawn: Callable[[int, float], None] | None = None,
    ):
        self.engine, self.cmd, self.port, self.log_path = engine, cmd, port, Path(log_path)
        self.on_spawn = on_spawn
        self.proc: subprocess.Popen | None = None
        self.t_spawn = 0.0

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> float:
        """Spawn the server; returns the perf_counter time the process started (t0 of start-up figures)."""
        if port_in_use(self.port):
            raise ServerError(f"port {self.port} on {HOST} is in use: the {self.engine} server cannot bind it")
        with open(self.log_path, "ab") as log:
            self.t_spawn = time.perf_counter()
            self.proc = subprocess.Popen(
                self.cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        _LIVE[self.proc.pid] = self
        if self.on_spawn:
            try:
                self.on_spawn(self.proc.pid, psutil.Process(self.proc.pid).create_time())
            except psutil.NoSuchProcess:
                pass
        return self.t_spawn

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
        except OSError:
            return ""

    def wait_ready(self, timeout_s: float) -> float:
        """Seconds from spawn until the server answered a 1-token completion (its model is loaded).

        ServerError if it exits or is not ready within ``timeout_s``. While the port refuses, the probe is
        retried every POLL_S; once it connects, it waits for the answer (mlx_lm.server holds it until its
        start-up load is done), at most until the deadline."""
        deadline = self.t_spawn + timeout_s
        while True:
            rc = self.proc.poll()
            if rc is not None:
                tail = self.log_tail()
                hint = f" (port {self.port} in use)" if "address already in use" in tail.lower() else ""
                raise ServerError(
                    f"the {self.engine} server exited with status {rc} before it was ready{hint}: "
                    f"{tail.strip()[-400:]}",
                    tail,
                )
            left = deadline - time.perf_counter()
            if left > 0 and answers_completion(self.port, max(left, 0.01)):
                return time.perf_counter() - self.t_spawn
            if time.perf_counter() > deadline:
                raise ServerError(
                    f"the {self.engine} server was not ready within ready_timeout_s={timeout_s:g} s", self.log_tail()
                )
            time.sleep(POLL_S)

    def stop(self, timeout_s: float) -> tuple[float, bool]:
        """SIGTERM the group, SIGKILL after ``timeout_s``; returns (seconds until the group is gone, clean)."""
        if self.proc is None:
            return 0.0, True
        pgid, clean = self.proc.pid, True
        t0 = time.perf_counter()
        _signal_group(pgid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            clean = False
            _signal_group(pgid, signal.SIGKILL)
            self.proc.wait()
        # The leader is gone; anything else it started must be gone too (no orphans after a job).
        while _group_alive(pgid):
            waited = time.perf_counter() - t0
            if waited > timeout_s + 5:
                _signal_group(pgid, signal.SIGKILL)
                clean = False
            if waited > timeout_s + 10:  # only unreaped zombies can be left by now: they hold no memory
                break
            time.sleep(0.01)
        _LIVE.pop(pgid, None)
        self.proc = None
        return time.perf_counter() - t0, clean

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.stop(5.0)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_live_groups() -> None:
    """Last resort for a job process about to die: SIGKILL every server group it has not stopped."""
    for pgid in list(_LIVE):
        _signal_group(pgid, signal.SIGKILL)
        _LIVE.pop(pgid, None)
