"""The swap workload: model A loaded and warm; unload A, load B, first token of B, timed apart and together.

Per repetition: A is loaded (untimed) and warmed with one prefill + decode, so its pages and the
engine's buffers are hot; B's files are made cold (evicted through the platform seam) or warm (read once) as the job asks, and
the fraction actually resident is measured with mincore just before the timed region: a cold job with more
than COLD_MAX_RESIDENT of B still resident fails with that reason instead of being stored as cold, and a warm
job with less than WARM_MIN_RESIDENT likewise.
Then unload A -> load B -> first token of B. B is unloaded again (untimed) before the next repetition.
"""

from __future__ import annotations

import gc
import time

from siliconbench.contract.engines import describe
from siliconbench.contract.errors import WorkloadError
from siliconbench.contract.workloads import CTX_SLACK

from siliconbench.worker.measure import pagecache
from siliconbench.worker.workloads.common import (
    Context,
    Outcome,
    SampleLog,
    done,
    engine_for,
    repetitions,
    rss_now_bytes,
)
from siliconbench.worker.workloads.timing import rep_seed, synthetic_tokens

# A "cold" swap with more of B's pages resident than this after eviction is refused, not stored as cold.
COLD_MAX_RESIDENT = 0.10
# A "warm" swap with less resident than this (memory pressure evicted what was read) is refused, not stored
# as warm; a few pages short of 1.0 is normal on a busy host and is recorded as measured.
WARM_MIN_RESIDENT = 0.90
WARM_TOKENS = (32, 8)  # prompt, decode of A's warm-up: enough to touch every weight and the KV path


def _options(ctx: Context) -> dict:
    opts = dict(ctx.job.engine_options)
    if describe(ctx.job.engine).takes_mmap:
        opts["use_mmap"] = bool(ctx.job.params["mmap"])  # the job's mmap setting, for A and B alike
    return opts


def _load(ctx: Context, path, n_ctx: int):
    engine = engine_for(ctx.job, _options(ctx))
    engine.load(path, _options(ctx), n_ctx=n_ctx)
    return engine


def _warm_up(engine, seed: int) -> None:
    vocab, avoid = engine.vocab_size(), engine.special_token_ids()
    engine.reset()
    first = engine.first_token(engine.prefill(synthetic_tokens(vocab, avoid, WARM_TOKENS[0], seed)))
    engine.decode(first, WARM_TOKENS[1])


def _prepare_cache(path, state: str) -> None:
    if state == "cold":
        pagecache.evict(path)
    else:
        pagecache.warm(path)


def run(ctx: Context) -> Outcome:
    job, p = ctx.job, ctx.job.params
    a_path, b_path = ctx.artifact, ctx.models_dir / p["to_artifact"]
    n_ctx = max(job.n_prompt, WARM_TOKENS[0] + WARM_TOKENS[1]) + CTX_SLACK
    log = SampleLog()
    a_load_s = []
    for r, warm in repetitions(ctx):
        seed = rep_seed(job, r)
        t = time.perf_counter()
        a = _load(ctx, a_path, n_ctx)
        a_load_s.append(time.perf_counter() - t)
        _warm_up(a, seed)
        _prepare_cache(b_path, p["cache"])
        gc.collect()  # no collector pause inside the timed region from the untimed work above
        resident = pagecache.resident_fraction(b_path)
        if p["cache"] == "cold" and resident > COLD_MAX_RESIDENT:
            how = (
                "the OS cannot evict here"
                if not pagecache.can_evict()
                else "another process maps them, or the filesystem (tmpfs) keeps them"
            )
            raise WorkloadError(
                f"cache: cold: {resident:.0%} of {p['to_artifact']}'s pages are still in the page "
                f"cache after eviction ({how}); a warm load would be stored as cold. Close what "
                f"maps the model, or measure cache: warm."
            )
        if p["cache"] == "warm" and resident < WARM_MIN_RESIDENT:
            raise WorkloadError(
                f"cache: warm: only {resident:.0%} of {p['to_artifact']}'s pages are in the page "
                f"cache after reading it (memory pressure evicts them); a partly cold load would "
                f"be stored as warm. Free memory on the host, or measure cache: cold."
            )

        t0 = time.perf_counter()
        a.close()
        del a
        t1 = time.perf_counter()
        rss_after_unload = rss_now_bytes()
        t1b = time.perf_counter()  # the RSS read is not part of the swap
        b = _load(ctx, b_path, n_ctx)
        t2 = time.perf_counter()
        prompt = synthetic_tokens(b.vocab_size(), b.special_token_ids(), job.n_prompt, seed * 2)
        t2b = time.perf_counter()  # drawing synthetic ids is not the engine's work either
        b.reset()
        b.first_token(b.prefill(prompt))
        t3 = time.perf_counter()

        log.add(
            {
                "swap_unload_s": t1 - t0,
                "swap_load_s": t2 - t1b,
                "swap_first_token_ms": (t3 - t2b) * 1000.0,
                "swap_total_s": (t3 - t0) - (t1b - t1) - (t2b - t2),
                "page_cache_resident_fraction": resident,
                "swap_rss_after_unload_bytes": rss_after_unload,
            },
            warmup=warm,
        )
        last = b
        if r < job.warmup + job.repetitions - 1:
            b.close()
            del b
        done(ctx, r, warm)
    engine = last
    extra = {
        "cache_requested": p["cache"],
        "cache_evict_supported": pagecache.can_evict(),
        "mmap": p["mmap"],
        "a_artifact": job.artifact,
        "b_artifact": p["to_artifact"],
        "a_load_s_untimed": a_load_s,
        "n_ctx": n_ctx,
    }
    outcome = Outcome(samples=log.samples, engine=engine, extra=extra, load_s=a_load_s[-1] if a_load_s else None)
    engine.close()
    return outcome
