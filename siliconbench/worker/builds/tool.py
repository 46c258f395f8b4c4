"""A build measured through its own llama-bench: what runs every commit, whatever its ``llama.h``.

Most commits of a real range match no llama-cpp-python binding (``header``), so a job on such a build runs the
generate workload's two timed regions through the build's ``llama-bench``, compiled against the build's own
header, in the job's fresh child: one llama-bench process, ``-r`` the job's repetitions, its own warm-up run
(``--no-warmup`` when the job asks none), the job's threads, batch sizes, flash attention, KV types, mmap and
offload. llama-bench reports one tokens/s per repetition (``samples_ts``), kept as raw samples:

- ``prefill_tps``: the ``pp<n_prompt>`` test at depth ``n_depth`` (our prefill: the prompt after the depth);
- ``decode_tps``: the ``tg<n_gen>`` test at depth ``n_depth + n_prompt`` (our decode starts after the prompt).

TTFT is not measured this way (llama-bench has no first-token region). The result says it was measured so
(``engine_options.driver`` and ``engine_build.measured_by``), which keeps such results apart from the binding's:
``benchmarks/build_paths.py`` holds the two paths against each other on a build where both work.
"""

from __future__ import annotations

import json
import subprocess
from functools import lru_cache
from pathlib import Path

from siliconbench.contract.errors import WorkloadError

from siliconbench.worker.builds.compile import Build

TOOL_TIMEOUT_S = 3600


@lru_cache(maxsize=16)
def _help(tool: str) -> str:
    """The tool's --help: its options moved between commits (-mmp became --load-mode; -fa took 0/1, then names)."""
    out = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=60)
    return out.stdout + out.stderr


def llama_bench_args(build: Build, artifact: Path, job, options: dict) -> list[str]:
    """The job as this build's llama-bench spells it (its --help says which spelling it knows)."""
    tool = str(build.tool("llama-bench"))
    knows = _help(tool)
    depths = sorted({job.n_depth, job.n_depth + job.n_prompt})
    if depths != [0] and "--n-depth" not in knows:
        raise WorkloadError(
            f"the llama-bench of {build.rev.label} has no --n-depth: decode after a prompt "
            "(depth n_prompt) cannot be measured with it"
        )
    mmap = bool(options.get("use_mmap", True))
    args = [
        tool,
        "-m",
        str(artifact),
        "-p",
        str(job.n_prompt),
        "-n",
        str(job.n_gen),
        "-r",
        str(job.repetitions),
        "-o",
        "json",
        "-b",
        str(options.get("n_batch", 2048)),
        "-ub",
        str(options.get("n_ubatch", 512)),
        "-ctk",
        str(options.get("type_k", "f16")),
        "-ctv",
        str(options.get("type_v", "f16")),
        "-ngl",
        str(99 if int(options.get("n_gpu_layers", -1)) < 0 else options["n_gpu_layers"]),
    ]
    if depths != [0]:
        args += ["-d", ",".join(map(str, depths))]
    if "-mmp" in knows:
        args += ["-mmp", "1" if mmap else "0"]
    elif "--load-mode" in knows:
        args += ["-lm", "mmap" if mmap else "none"]
    if options.get("threads"):
        args += ["-t", str(options["threads"])]
    if (fa := options.get("flash_attn", "auto")) != "auto":
        args += ["-fa", fa if "on|off" in knows else {"on": "1", "off": "0"}[fa]]
    if job.warmup == 0:
        args.append("--no-warmup")
    return args


def run_llama_bench(build: Build, artifact: Path, job, options: dict) -> tuple[list[dict], dict]:
    """Per repetition {prefill_tps, decode_tps}, and what llama-bench said of itself (its rows, less samples)."""
    args = llama_bench_args(build, artifact, job, options)
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise WorkloadError(f"llama-bench of {build.rev.label} ran past {TOOL_TIMEOUT_S} s") from None
    if out.returncode != 0:
        err = WorkloadError(f"llama-bench of {build.rev.label} failed (exit {out.returncode})")
        err.log_tail = out.stderr[-3000:]
        raise err
    try:
        rows = json.loads(out.stdout)
    except json.JSONDecodeError:
        err = WorkloadError(f"llama-bench of {build.rev.label} printed no JSON")
        err.log_tail = (out.stdout + out.stderr)[-3000:]
        raise err from None
    pp = _row(rows, n_prompt=job.n_prompt, n_gen=0, depth=job.n_depth)
    tg = _row(rows, n_prompt=0, n_gen=job.n_gen, depth=job.n_depth + job.n_prompt)
    n = job.repetitions
    samples = [
        {
            "prefill_tps": pp["samples_ts"][i] if pp else None,
            "decode_tps": tg["samples_ts"][i] if tg else None,
        }
        for i in range(n)
    ]
    first = rows[0] if rows else {}
    said = {
        k: first.get(k)
        for k in ("build_commit", "build_number", "backends", "gpu_info", "cpu_info", "n_threads", "flash_attn")
    }
    return samples, said


def _row(rows: list[dict], *, n_prompt: int, n_gen: int, depth: int) -> dict | None:
    if n_prompt == 0 and n_gen == 0:
        return None
    for r in rows:
        if r.get("n_prompt") == n_prompt and r.get("n_gen") == n_gen and int(r.get("n_depth", 0)) == depth:
            return r
    return None


class ToolEngine:
    """Stands where an engine adapter stands for a job measured through the build's llama-bench: what
    ``run_workload`` asks of an engine for the result's Environment (describe, dtypes, memory facts, close)."""

    def __init__(self, build: Build, options: dict) -> None:
        self.build, self.options, self.said = build, dict(options), {}

    def measure(self, artifact: Path, job) -> list[dict]:
        samples, self.said = run_llama_bench(self.build, artifact, job, self.options)
        return samples

    def describe(self) -> dict:
        backends = str(self.said.get("backends") or "")
        offload = int(self.options.get("n_gpu_layers", -1)) != 0 and self.build.backend != "CPU"
        return {
            "packages": {},
            "engine_build": {"system_info": f"llama-bench backends: {backends}" if backends else ""},
            "backend": self.build.backend if offload else "CPU",
            "engine_options": self.options,
            "dtypes": self.dtypes(),
        }

    def dtypes(self) -> dict[str, str]:
        kv = self.options.get("type_k", "f16")
        return {"weights": "?", "activations": "f32", "kv_cache": kv}

    def memory_facts(self) -> dict:
        return {}

    def vocab_size(self) -> int:
        return 0

    def close(self) -> None:
        pass
