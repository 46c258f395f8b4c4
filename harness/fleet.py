"""Real processes for fleet tests: Celery workers, a private Redis, a TCP cut in front of PostgreSQL.

Every process is started here and stopped by the PID we got when starting it; nothing is killed by name.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout_s: float = 60, every_s: float = 0.3, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


class CliProc:
    """A `siliconbench ...` subprocess with its own log file, stopped or killed by the PID it was started with."""

    def __init__(self, name: str, args: list[str], env: dict, log_dir: Path, log_name: str | None = None):
        self.name = name
        self.log_path = log_dir / f"{log_name or name}-{time.time_ns()}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "siliconbench.cli.main", *args],
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
        )
        self.pid = self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill9(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill9()
        self.log.close()

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")


class WorkerProc(CliProc):
    """`siliconbench worker` as a real subprocess (a real Celery worker consuming real Redis)."""

    def __init__(
        self,
        name: str,
        *,
        broker: str,
        database: str,
        models_dir: Path,
        log_dir: Path,
        engines: str | None = None,
        env: dict | None = None,
    ):
        args = ["worker", "--broker", broker, "--database", database, "--name", name, "--models-dir", str(models_dir)]
        if engines:
            args += ["--engines", engines]
        env = {"SILICONBENCH_SPOOL_DIR": str(log_dir / f"spool-{name}"), **(env or {})}
        self.spool_dir = Path(env["SILICONBENCH_SPOOL_DIR"])
        super().__init__(name, args, env, log_dir, log_name=f"worker-{name}")

    def wait_ready(self, timeout_s: float = 60) -> WorkerProc:
        wait_for(
            lambda: b" ready." in self.log_path.read_bytes() or self.proc.poll() is not None,
            timeout_s,
            what=f"worker {self.name} to be ready",
        )
        assert self.proc.poll() is None, self.log_path.read_text()[-3000:]
        return self


class RedisServer:
    """A private redis-server without persistence, on its own port: restartable, killable by PID."""

    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> RedisServer:
        exe = shutil.which("redis-server")
        assert exe, "redis-server is not installed"
        self.proc = subprocess.Popen(
            [exe, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no", "--dir", "/tmp"],
            stdout=subprocess.DEVNULL,
        )
        wait_for(self._up, 10, what=f"redis on {self.port}")
        return self

    def _up(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


class TcpCut:
    """A TCP proxy in front of PostgreSQL that can be cut (every connection dropped) and restored."""

    def __init__(self, target_port: int = 5432):
        self.target = ("127.0.0.1", target_port)
        self.port = free_port()
        self.open = threading.Event()
        self.open.set()
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self.open.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def cut(self) -> None:
        self.open.clear()
        with self.lock:
            for s in self.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()
                except OSError:
                    pass
            self.conns.clear()

    def restore(self) -> None:
        self.open.set()

    def close(self) -> None:
        self.cut()
        self.server.close()
