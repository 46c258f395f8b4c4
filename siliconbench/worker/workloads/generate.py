"""The generate workload, measured the way llama-bench and mlx_lm.benchmark do.

Per repetition: a fresh KV cache, ``n_depth`` untimed tokens, then a seeded synthetic prompt of exactly
``n_prompt`` token ids (prefill, TTFT), then exactly ``n_gen`` greedy decode steps with EOS ignored (the timed core
is ``timing.timed_generation``, shared with long_context). ``prompt_ids_digest`` is stored with each result so a
reader can check that both engines got the same ids. Warmup repetitions run the same way and are returned
flagged, never mixed into the measured ones. Timed regions are defined in ``siliconbench.contract.metrics``; decode's share
of the memory bandwidth beside it (``decode_bandwidth_pct``) comes from ``siliconbench.worker.measure.roofline``.
"""

from __future__ import annotations

import hashlib
import json
import time

from siliconbench.contract.engines import describe
from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.workloads import CTX_SLACK

from siliconbench.worker.builds.tool import ToolEngine
from siliconbench.worker.engines.base import Engine
from siliconbench.worker.measure import roofline
from siliconbench.worker.platform.host_facts import host_facts
from siliconbench.worker.workloads.common import (
    Context,
    Outcome,
    SampleLog,
    done,
    engine_for,
    fault_point,
    repetitions,
    rss_now_bytes,
)
from siliconbench.worker.workloads.timing import (
    depth_ids,
    energy_windows,
    prompt_ids,
    rep_seed,
    timed_generation,
)

# A cancelled job's native decode must die at once, as SIGTERM's default does: it starts no server to stop.
SIGTERM_UNWINDS = False


def repetition_ids(engine: Engine, job: JobSpec, seed: int) -> tuple[list[int], list[int]]:
    """(depth ids, prompt ids) of one repetition: the same for every engine with the same vocabulary."""
    return depth_ids(engine, job.n_depth, seed), prompt_ids(engine, job.n_prompt, seed)


def prompt_ids_digest(engine: Engine, job: JobSpec) -> str:
    """sha256 of every repetition's depth and prompt ids (warmups included), in order."""
    h = hashlib.sha256()
    for r in range(job.warmup + job.repetitions):
        depth, prompt = repetition_ids(engine, job, rep_seed(job, r))
        h.update(json.dumps([depth, prompt], separators=(",", ":")).encode())
    return h.hexdigest()


def run(ctx: Context) -> Outcome:
    job = ctx.job
    engine = engine_for(job)
    if isinstance(engine, ToolEngine):
        return _through_tool(ctx, engine)
    for module in describe(job.engine).modules:  # imported before the baseline: baseline = interpreter + engine
        __import__(module)
    baseline, baseline_footprint = rss_now_bytes(), ctx.footprint_now()
    n_ctx = job.n_depth + job.n_prompt + job.n_gen + CTX_SLACK
    t0 = time.perf_counter()
    engine.load(ctx.artifact, job.engine_options, n_ctx=n_ctx)
    load_s = time.perf_counter() - t0
    fault_point("load")
    ctx.emit("loaded", load_s=load_s)

    log = SampleLog()
    for r, warm in repetitions(ctx):
        depth, prompt = repetition_ids(engine, job, rep_seed(job, r))
        engine.reset()
        engine.fill(depth)
        log.add(timed_generation(engine, prompt, job.n_gen, ctx.meter), warmup=warm)
        done(ctx, r, warm)
    if ctx.meter is not None:  # a GPU's joules per token: one sample of its own, after the timed repetitions
        log.add(energy_windows(engine, prompt, job.n_gen, len(depth), ctx.meter))

    ceiling = _roofline(ctx, engine)
    measured = []
    for s in log.samples:
        if "decode_tps" not in s.values:
            continue  # the energy windows' sample
        if (pct := roofline.bandwidth_pct(s.values["decode_tps"], ceiling)) is not None:
            s.values["decode_bandwidth_pct"] = pct
        if not s.warmup:
            measured.append(s.values.get("decode_bandwidth_pct", 0.0))
    roofline.mark_exceeded(ceiling, measured)
    extra = {
        "n_ctx": n_ctx,
        "vocab_size": engine.vocab_size(),
        "prompt_ids_sha256": prompt_ids_digest(engine, job),
        "roofline": ceiling,
    }
    outcome = Outcome(
        samples=log.samples,
        engine=engine,
        extra=extra,
        load_s=load_s,
        baseline_memory_bytes=baseline,
        baseline_footprint_bytes=baseline_footprint,
        device_memory=engine.memory_facts(),
    )
    engine.close()
    return outcome


def _roofline(ctx: Context, engine: Engine) -> dict:
    job, facts, desc = ctx.job, host_facts(), engine.describe()
    details = facts.get("host_details") or {}
    return roofline.bound(
        ModelCatalog(ctx.models_dir).get(job.model),
        ctx.artifact,
        job.n_depth,
        job.n_prompt,
        job.n_gen,
        engine.dtypes().get("kv_cache", "f16"),
        facts["chip"],
        details.get("gpu_cores"),
        gpu=details.get("gpu") if desc.get("backend") == "CUDA" else None,
    )


def _through_tool(ctx: Context, tool: ToolEngine) -> Outcome:
    """A build measured through its own llama-bench (siliconbench/worker/builds/tool.py): its per-repetition figures."""
    log = SampleLog()
    t0 = time.perf_counter()
    for values in tool.measure(ctx.artifact, ctx.job):
        log.add(values)
    ctx.emit("measured", seconds=time.perf_counter() - t0)
    # llama-bench ran in its own process: this one's peak memory is not the engine's
    return Outcome(samples=log.samples, engine=tool, extra={"tool": tool.said}, own_peak=False)
