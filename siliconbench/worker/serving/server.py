"""One engine server (llama.cpp's `llama-server`, `python -m llama_cpp.server`, `python -m mlx_lm server`) on
127.0.0.1, always torn down.

Readiness means the model is loaded: the probe is a 1-token completion, not /health. llama_cpp.server loads
the model before it binds (its /v1/models answers only then), but mlx_lm.server binds at once and loads the
model at start-up in its generation thread, and its /health answers 200 during the load (it reports only
that the thread is alive); a completion request sent meanwhile waits in its queue until the model is loaded.

Each server runs in its own process group, so stopping it takes every process it started. Every spawn
is announced (``on_spawn``) so that the job runner can kill the group if the job's own process dies
before it could; `live_groups` lets a dying job process do the same.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Callable

import psutil

from siliconbench.contract.engines import describe
from siliconbench.contract.errors import WorkloadError
from siliconbench.contract.settings import llama_tools_dir

from siliconbench.worker.builds.driver import current
from siliconbench.worker.engines.llama_cpp import flash_attn_mode
from siliconbench.worker.platform.threads import performance_cores
from siliconbench.worker.serving.client import answers_completion

READY_PROBE = "POST /v1/completions (1 token, non-streaming) answered with HTTP 200"
POLL_S = 0.02  # readiness poll while the port refuses: fine enough for start times of ~1 s
HOST = "127.0.0.1"
LOG_TAIL_CHARS = 1500
_LIVE: dict[int, "Server"] = {}  # pgid -> server not yet stopped, for last-resort cleanup


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


def server_of(job) -> str:
    """The server a job runs: the one its params name, else the one its engine's jobs ran before the choice."""
    return job.params.get("server") or describe(job.engine).unnamed_server


def command(job, artifact: Path, port: int, n_ctx: int, slots: int = 1) -> list[str]:
    """The command line of the job's server with the job's engine options (what the in-process adapters use):
    ``slots`` requests served at once where the server has slots, each with ``n_ctx`` tokens of context."""
    kind = SERVERS[server_of(job)]
    return kind.command(sys.executable, artifact, port, job.engine_options, n_ctx, job.n_gen, slots)


def server_facts(job, cmd: list[str], n_ctx: int, slots: int) -> dict:
    """What a server workload's result records of its server, as started: which one, its arguments (after
    `python -m` or the binary), its context and slots, and the readiness probe (SERVER_FACTS)."""
    return {
        "server": server_of(job),
        "server_args": cmd[2:] if cmd[1] == "-m" else cmd[1:],
        "n_ctx": n_ctx,
        "slots": slots,
        "ready_probe": READY_PROBE,
    }


def llama_server_binary() -> Path:
    """llama-server of the job's llama.cpp build, else of the llama.cpp tree the pinned llama-cpp-python vendors
    (scripts/build_llama_tools.sh builds it beside llama-bench)."""
    build = current()
    if build is not None:
        return build.tool("llama-server")
    found = llama_tools_dir(version("llama-cpp-python")) / "llama-server"
    if not found.exists():
        raise ServerError(
            f"no llama-server in {found.parent}: run `make bootstrap` (scripts/build_llama_tools.sh builds it), or "
            "choose `server: llama_cpp.server` in the workload"
        )
    return found


def _llama_server(
    py: str, artifact: Path, port: int, options: dict, n_ctx: int, max_tokens: int, slots: int
) -> list[str]:
    threads = options.get("threads") or performance_cores()
    args = [
        str(llama_server_binary()),
        "--model",
        str(artifact),
        "--host",
        HOST,
        "--port",
        str(port),
        "--ctx-size",
        str(n_ctx * slots),  # llama-server divides its context among its slots
        "--parallel",
        str(slots),
        "--threads",
        str(threads),
        "--threads-batch",
        str(threads),
        "--batch-size",
        str(options.get("n_batch", 2048)),
        "--ubatch-size",
        str(options.get("n_ubatch", 512)),
        "--n-gpu-layers",
        str(99 if int(options.get("n_gpu_layers", -1)) < 0 else options["n_gpu_layers"]),
        "--flash-attn",
        str(options.get("flash_attn", "auto")),
        "--cache-type-k",
        str(options.get("type_k", "f16")),
        "--cache-type-v",
        str(options.get("type_v", "f16")),
        "--no-webui",
    ]
    if not options.get("use_mmap", True):
        args.append("--no-mmap")
    return args


def _llama_cpp_python_server(
    py: str, artifact: Path, port: int, options: dict, n_ctx: int, max_tokens: int, slots: int
) -> list[str]:
    # The in-process adapter's threads: the sweep's, else the physical performance cores (llama-bench's -t).
    threads = options.get("threads") or performance_cores()
    thread_args = ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
    return [
        py,
        "-m",
        "llama_cpp.server",
        "--model",
        str(artifact),
        "--host",
        HOST,
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        *thread_args,
        "--n_batch",
        str(options.get("n_batch", 2048)),
        "--n_ubatch",
        str(options.get("n_ubatch", 512)),
        "--n_gpu_layers",
        str(options.get("n_gpu_layers", -1)),
        "--use_mmap",
        str(options.get("use_mmap", True)),
        "--use_mlock",
        "False",  # the server's default is True, the library's False: keep the library's
        # llama_cpp.server takes flash attention on/off only: 'auto' is sent as on, which is what llama.cpp's
        # auto chooses on Metal and CPU (the backends a worker runs) (the job's options record the request).
        "--flash_attn",
        str(server_flash_attn(options)),
        "--verbose",
        "False",
        # By default a new request cuts the one streaming (it ends after a token): queue them instead.
        "--interrupt_requests",
        "False",
    ]


def _mlx_lm_server(
    py: str, artifact: Path, port: int, options: dict, n_ctx: int, max_tokens: int, slots: int
) -> list[str]:
    return [
        py,
        "-m",
        "mlx_lm",
        "server",
        "--model",
        str(artifact),
        "--host",
        HOST,
        "--port",
        str(port),
        "--prefill-step-size",
        str(options.get("prefill_step_size", 2048)),
        "--max-tokens",
        str(max_tokens),
        "--log-level",
        "WARNING",
    ]


def mlx_server_defaults() -> dict:
    """--decode-concurrency and --prompt-concurrency defaults of the installed mlx_lm.server and its batch time
    slice, read from its source (the parser is built inside main()); None where not found. Read without
    importing mlx_lm."""
    out = {"decode_concurrency": None, "prompt_concurrency": None, "time_slice_s": None}
    try:
        spec = importlib.util.find_spec("mlx_lm")
        src = (Path(spec.origin).parent / "server.py").read_text()
    except (ImportError, AttributeError, TypeError, OSError):
        return out
    for key in ("decode_concurrency", "prompt_concurrency"):
        m = re.search(rf'"--{key.replace("_", "-")}",\s*type=int,\s*default=(\d+)', src)
        out[key] = int(m.group(1)) if m else None
    # Its generation thread runs the batch for TimeBudget(budget=...) seconds before it looks at new requests.
    m = re.search(r"class TimeBudget:\s*def __init__\(self, budget=([0-9.]+)", src)
    out["time_slice_s"] = float(m.group(1)) if m else None
    return out


def batching(job, clients: int) -> dict:
    """How the job's server serves concurrent requests, as configured (its code and its defaults; not observed)."""
    return SERVERS[server_of(job)].batching(clients)


def _llama_server_batching(clients: int) -> dict:
    return {
        "batches": True,
        "max_batch": clients,
        "slots": clients,
        "how": "llama-server with --parallel = the clients: one slot each, each with the job's context; continuous "
        "batching (its default) decodes every active slot in one batch and admits a new request into a free slot "
        "between steps; cache_prompt (its default) keeps each slot's last prompt for reuse",
    }


def _one_at_a_time(clients: int) -> dict:
    return {
        "batches": False,
        "max_batch": 1,
        "how": "llama_cpp.server holds one Llama behind a lock: one request at a time; with "
        "--interrupt_requests False the others wait for it (queued), FIFO",
    }


def _mlx_batching(clients: int) -> dict:
    d = mlx_server_defaults()
    dc = d["decode_concurrency"]
    return {
        "batches": True,
        "max_batch": min(clients, dc) if dc else None,
        **d,
        "how": "mlx_lm.server continuous batching (BatchGenerator) at its defaults: a request joins the "
        "running batch when it carries no seed, the server has no --kv-bits and no draft model and "
        "the model's KV cache can merge; prefill of up to prompt_concurrency prompts at once, decode "
        "of up to decode_concurrency. The generation thread picks up new requests only between time "
        "slices of time_slice_s (or when the batch empties): of a burst, the requests queued when a "
        "slice starts begin together, later ones join up to time_slice_s later",
    }


@dataclass(frozen=True)
class ServerKind:
    """One OpenAI-compatible server an engine description names (``servers``): how it is started with a job's
    options, and how it serves concurrent requests. Adding a server is one entry in SERVERS."""

    command: Callable[[str, Path, int, dict, int, int, int], list[str]]
    batching: Callable[[int], dict]


SERVERS = {
    "llama-server": ServerKind(_llama_server, _llama_server_batching),
    "llama_cpp.server": ServerKind(_llama_cpp_python_server, _one_at_a_time),
    "mlx_lm.server": ServerKind(_mlx_lm_server, _mlx_batching),
}


def server_flash_attn(options: dict) -> bool:
    return flash_attn_mode(options.get("flash_attn", "auto")) != "off"  # the in-process adapter's reading


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

    def __enter__(self) -> "Server":
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
