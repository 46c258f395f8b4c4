"""Stored results out in llama-bench's JSON shape: a pp test from prefill, a tg test from decode."""

from __future__ import annotations

import json
from datetime import UTC

from siliconbench.contract.aggregate import summarize
from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.results import JobResult, JobStatus

from siliconbench.coordinator.reports.llamabench.records import as_bool, as_int


def _flash_attn_field(value) -> int:
    """llama-bench writes the requested llama_flash_attn_type: -1 auto, 0 off, 1 on."""
    if isinstance(value, str) and value in ("auto", "on", "off"):
        return {"auto": -1, "off": 0, "on": 1}[value]
    return int(as_bool(value))


def _record(job: JobSpec, result: JobResult, *, n_prompt: int, n_gen: int, n_depth: int, ts: list[float]) -> dict:
    env = result.environment
    build = (env.engine_build if env else {}) or {}
    opts = {**job.engine_options, **((env.engine_options if env else {}) or {})}
    n = n_prompt + n_gen
    ns = [n / v * 1e9 for v in ts if v > 0]
    s_ts, s_ns = summarize(ts), summarize(ns)
    if job.engine == "llama.cpp":
        commit, backends = build.get("commit", ""), (env.backend if env else "") or "CPU"
    else:
        pk = env.packages if env else {}
        commit = f"mlx-lm {pk.get('mlx-lm', '?')} / mlx {pk.get('mlx', '?')}"
        backends = f"MLX ({env.backend})" if env and env.backend else "MLX"
    when = result.started_at or result.finished_at
    return {
        "build_commit": commit,
        "build_number": as_int(build.get("build_number")),
        "cpu_info": env.chip if env else "",
        "gpu_info": build.get("gpu_info", ""),
        "backends": backends,
        "model_filename": job.artifact,
        "model_type": f"{job.model} {job.quant}",
        "model_size": 0,
        "model_n_params": 0,
        "n_batch": as_int(opts.get("n_batch")),
        "n_ubatch": as_int(opts.get("n_ubatch")),
        # a pp test runs on the batch threads, a tg test on the decode threads (equal unless a user split them)
        "n_threads": as_int(opts.get("threads_batch") if n_prompt else opts.get("threads"))
        or as_int(opts.get("threads")),
        "type_k": opts.get("type_k", "f16"),
        "type_v": opts.get("type_v", "f16"),
        "n_gpu_layers": as_int(opts.get("n_gpu_layers"), 99) if opts.get("n_gpu_layers") != "all" else 99,
        "flash_attn": _flash_attn_field(opts.get("flash_attn")),
        "use_mmap": as_bool(opts.get("use_mmap", True)),
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "n_depth": n_depth,
        "test_time": when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if when else "",
        "avg_ns": round(s_ns.mean) if s_ns else 0,
        "stddev_ns": round(s_ns.stddev) if s_ns else 0,
        "avg_ts": s_ts.mean if s_ts else 0.0,
        "stddev_ts": s_ts.stddev if s_ts else 0.0,
        "samples_ns": [round(x) for x in ns],
        "samples_ts": list(ts),
    }


def export_records(pairs: list[tuple[JobSpec, JobResult]], engines: tuple[str, ...] = ("llama.cpp",)) -> list[dict]:
    """llama-bench-shaped records of stored results: a pp test from prefill, a tg test from decode
    (at depth = the job's depth + prompt, where siliconbench's decode starts). MLX results only when
    asked for: their ``backends`` reads ``MLX (...)`` and ``build_commit`` the mlx-lm and mlx versions."""
    out = []
    for job, result in pairs:
        if result.status != JobStatus.ok or job.workload != "generate" or job.engine not in engines:
            continue
        pre, dec = result.measured("prefill_tps"), result.measured("decode_tps")
        if pre and job.n_prompt:
            out.append(_record(job, result, n_prompt=job.n_prompt, n_gen=0, n_depth=job.n_depth, ts=pre))
        if dec and job.n_gen:
            out.append(_record(job, result, n_prompt=0, n_gen=job.n_gen, n_depth=job.n_depth + job.n_prompt, ts=dec))
    return out


def dumps(records: list[dict], fmt: str) -> str:
    if fmt == "llama-bench-jsonl":
        return "".join(json.dumps(r) + "\n" for r in records)
    return json.dumps(records, indent=2) + "\n"
