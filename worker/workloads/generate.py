"""The generate workload, measured the way llama-bench and mlx_lm.benchmark do.

Per repetition: a fresh KV cache, ``n_depth`` untimed tokens, then a seeded synthetic prompt of
exactly ``n_prompt`` token ids (prefill, TTFT), then exactly ``n_gen`` greedy decode steps with EOS
ignored. Warmup repetitions run the same way and are returned flagged, never mixed into the
measured ones. Timed regions are defined in ``siliconbench.metrics``.
"""

from __future__ import annotations

import random
import time
from typing import Callable

from siliconbench.jobs import JobSpec
from siliconbench.results import Sample

from ..engines.base import Engine


def synthetic_tokens(vocab_size: int, avoid: set[int], n: int, seed: int) -> list[int]:
    """n token ids drawn uniformly from the vocabulary minus control tokens; same seed, same ids."""
    rng = random.Random(seed)
    out: list[int] = []
    while len(out) < n:
        t = rng.randrange(vocab_size)
        if t not in avoid:
            out.append(t)
    return out


def run_repetition(engine: Engine, job: JobSpec, rep_seed: int) -> dict[str, float]:
    vocab, avoid = engine.vocab_size(), engine.special_token_ids()
    depth = synthetic_tokens(vocab, avoid, job.n_depth, rep_seed * 2 + 1)
    prompt = synthetic_tokens(vocab, avoid, job.n_prompt, rep_seed * 2)
    engine.reset()
    engine.fill(depth)

    clock = time.perf_counter
    t0 = clock()
    logits = engine.prefill(prompt)
    t1 = clock()
    first = engine.first_token(logits)
    t2 = clock()
    engine.decode(first, job.n_gen)
    t3 = clock()

    values = {
        "prefill_tps": job.n_prompt / (t1 - t0),
        "ttft_ms": (t2 - t0) * 1000.0,
        "decode_tps": job.n_gen / (t3 - t2),
    }
    values.update(engine.counters())
    values.update(engine.repetition_memory())
    return values


def run(engine: Engine, job: JobSpec, on_rep: Callable[[int, bool], None] | None = None) -> list[Sample]:
    """Warmup then measured repetitions; the seed of repetition r is (job seed, r), shared by engines."""
    samples = []
    total = job.warmup + job.repetitions
    for r in range(total):
        warm = r < job.warmup
        if r and job.delay_s:
            time.sleep(job.delay_s)
        values = run_repetition(engine, job, rep_seed=job.seed * 100_003 + r)
        samples.append(Sample(repetition=r - job.warmup, warmup=warm, values=values))
        if on_rep:
            on_rep(r, warm)
    return samples
