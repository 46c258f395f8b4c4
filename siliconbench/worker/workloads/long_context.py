"""The long_context workload: a prompt of ``depth`` tokens prefilled whole, decode at that depth, KV memory.

The reference's "32K prefill with full prompt reprocessing": every repetition starts from an empty KV
cache and prefills all ``depth`` tokens in the timed region (no untimed fill, unlike generate's depth).
KV-cache memory is what the engine reports (see the registry's kv_cache_bytes), next to the figure
computed from the model's shape, so the two can be checked against each other.
"""

from __future__ import annotations

import time

from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.workloads import CTX_SLACK

from siliconbench.worker.workloads.common import (
    Context,
    Outcome,
    SampleLog,
    done,
    engine_for,
    repetitions,
    rss_now_bytes,
)
from siliconbench.worker.workloads.timing import energy_windows, prompt_ids, rep_seed, timed_generation


def model_shape(ctx: Context) -> dict:
    """Layers, KV heads and head size from the models folder's manifest (the same for every artifact): the head size
    the files declare, else hidden_size / n_heads."""
    m = ModelCatalog(ctx.models_dir).get(ctx.job.model)
    return {"n_layers": m.n_layers, "n_kv_heads": m.n_kv_heads, "head_dim": m.head_size}


def run(ctx: Context) -> Outcome:
    job = ctx.job
    depth, n_gen = job.params["depth"], job.n_gen
    n_ctx = depth + n_gen + CTX_SLACK
    engine = engine_for(ctx.job)
    baseline = rss_now_bytes()
    t = time.perf_counter()
    engine.load(ctx.artifact, job.engine_options, n_ctx=n_ctx)
    load_s = time.perf_counter() - t
    ctx.emit("loaded", load_s=load_s)
    shape = model_shape(ctx)
    log = SampleLog()
    kv = {}
    for r, warm in repetitions(ctx):
        prompt = prompt_ids(engine, depth, rep_seed(job, r))
        engine.reset()
        values = timed_generation(engine, prompt, n_gen, ctx.meter)
        kv = engine.kv_cache()
        computed = 2 * shape["n_layers"] * shape["n_kv_heads"] * shape["head_dim"] * (depth + n_gen) * kv["dtype_bytes"]
        log.add({**values, "kv_cache_bytes": kv["bytes"], "kv_cache_computed_bytes": computed}, warmup=warm)
        done(ctx, r, warm)
    if ctx.meter is not None:  # a GPU's joules per token: one sample of its own, after the timed repetitions
        log.add(energy_windows(engine, prompt, n_gen, 0, ctx.meter))
    source = engine.kv_source
    extra = {
        "depth": depth,
        "n_ctx": n_ctx,
        "kv_cache_source": source,
        "kv_tokens": kv.get("tokens"),
        "kv_dtype_bytes": kv.get("dtype_bytes"),
        **shape,
    }
    outcome = Outcome(samples=log.samples, engine=engine, extra=extra, load_s=load_s, baseline_memory_bytes=baseline)
    engine.close()
    return outcome
