"""The table of servers an engine description names (``SERVERS``): how each is started with a job's options, and
how it serves concurrent requests. Adding a server is one entry here; starting and stopping one is
``process.py``'s.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from siliconbench.contract.engines import describe
from siliconbench.contract.settings import llama_tools_dir

from siliconbench.worker.builds.driver import current
from siliconbench.worker.platform.threads import performance_cores
from siliconbench.worker.serving.mlx_defaults import mlx_server_defaults
from siliconbench.worker.serving.process import HOST, READY_PROBE, ServerError


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
    server = server_of(job)
    return {
        "server": server,
        "server_args": cmd[2:] if cmd[1] == "-m" else cmd[1:],
        "n_ctx": n_ctx,
        **({"slots": slots} if SERVERS[server].has_slots else {}),  # a server without slots records none
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


def batching(job, clients: int) -> dict:
    """How the job's server serves concurrent requests, as configured (its code and its defaults; not observed):
    ``clients`` is its slots where it has them, else the most requests the client keeps in flight."""
    return SERVERS[server_of(job)].batching(clients)


def has_slots(job) -> bool:
    return SERVERS[server_of(job)].has_slots


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
    has_slots: bool = False  # serves a fixed number of requests at once that the command line sets (--parallel)


SERVERS = {
    "llama-server": ServerKind(_llama_server, _llama_server_batching, has_slots=True),
    "llama_cpp.server": ServerKind(_llama_cpp_python_server, _one_at_a_time),
    "mlx_lm.server": ServerKind(_mlx_lm_server, _mlx_batching),
}


def server_flash_attn(options: dict) -> bool:
    # Imported here: loading llama-cpp-python (and numpy) would cost every job child that only runs a build's own
    # tools (llama-bench, llama-server) ~0.2 s of CPU.
    from siliconbench.worker.engines.llama_cpp import flash_attn_mode

    return flash_attn_mode(options.get("flash_attn", "auto")) != "off"  # the in-process adapter's reading
