"""The long_context workload: a prompt of ``depth`` tokens prefilled whole, decode at that depth, KV memory.

The reference's "32K prefill with full prompt reprocessing": every repetition starts from an empty KV
cache and prefills all ``depth`` tokens in the timed region (no untimed fill, unlike generate's depth).
KV-cache memory is what the engine reports (see the registry's kv_cache_bytes), next to the figure
computed from the model's shape, so the two can be checked against each other.
"""

from __future__ import annotations

import json
import time

from worker.workloads.common import Context, Outcome, SampleLog, done, engine_for, repetitions, rss_now_bytes
from worker.workloads.generate import synthetic_tokens


def model_shape(ctx: Context) -> dict:
    """Layers, KV heads and head size from the models folder's manifest (the same for every artifact)."""
    manifest = json.loads((ctx.models_dir / ctx.job.model / "manifest.json").read_text())
    return {"n_layers": manifest["n_layers"], "n_kv_heads": manifest["n_kv_heads"],
            "head_dim": manifest["hidden_size"] // manifest["n_heads"]}


def run(ctx: Context) -> Outcome:
    job = ctx.job
    depth, n_gen = job.params["depth"], job.n_gen
    n_ctx = depth + n_gen + 16
    engine = engine_for(ctx.job)
    baseline = rss_now_bytes()
    t = time.perf_counter()
    engine.load(ctx.artifact, job.engine_options, n_ctx=n_ctx)
    load_s = time.perf_counter() - t
    ctx.emit("loaded", load_s=load_s)
    shape = model_shape(ctx)
    vocab, avoid = engine.vocab_size(), engine.special_token_ids()
    log = SampleLog()
    clock = time.perf_counter
    kv = {}
    for r, warm in repetitions(ctx):
        prompt = synthetic_tokens(vocab, avoid, depth, (job.seed * 100_003 + r) * 2)
        engine.reset()
        t0 = clock()
        logits = engine.prefill(prompt)
        t1 = clock()
        first = engine.first_token(logits)
        t2 = clock()
        engine.decode(first, n_gen)
        t3 = clock()
        kv = engine.kv_cache()
        computed = 2 * shape["n_layers"] * shape["n_kv_heads"] * shape["head_dim"] * (depth + n_gen) * kv["dtype_bytes"]
        log.add({
            "prefill_tps": depth / (t1 - t0),
            "ttft_ms": (t2 - t0) * 1000.0,
            "decode_tps": n_gen / (t3 - t2),
            "kv_cache_bytes": kv["bytes"],
            "kv_cache_computed_bytes": computed,
            **engine.counters(),
            **engine.repetition_memory(),
        }, warmup=warm)
        done(ctx, r, warm)
    source = ("engine: llama_state_seq_get_size (used cells, F16 K/V)" if job.engine == "llama.cpp"
              else "engine: sum of KVCache.nbytes (arrays as allocated, 256-token steps)")
    extra = {"depth": depth, "n_ctx": n_ctx, "kv_cache_source": source, "kv_tokens": kv.get("tokens"),
             "kv_dtype_bytes": kv.get("dtype_bytes"), **shape}
    outcome = Outcome(samples=log.samples, engine=engine, extra=extra, load_s=load_s, baseline_memory_bytes=baseline)
    engine.close()
    return outcome
