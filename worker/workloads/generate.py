"""The generate workload, measured the way llama-bench and mlx_lm.benchmark do.

Per repetition: a fresh KV cache, ``n_depth`` untimed tokens, then a seeded synthetic prompt of
exactly ``n_prompt`` token ids (prefill, TTFT), then exactly ``n_gen`` greedy decode steps with EOS
ignored.

Prompts: ids drawn uniformly from the vocabulary minus ``Engine.special_token_ids()`` (one rule for both
engines), with no BOS for either engine. llama-bench puts BOS first when the vocabulary asks for one and
mlx_lm.benchmark never does; one token of a prompt does not move a throughput figure, and the same ids for
both engines matter more. ``prompt_ids_digest`` is stored with each result so a reader can check it. Warmup repetitions run the same way and are returned flagged, never mixed into the
measured ones. Timed regions are defined in ``siliconbench.metrics``.
"""

from __future__ import annotations

import hashlib
import json
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


def repetition_ids(engine: Engine, job: JobSpec, rep_seed: int) -> tuple[list[int], list[int]]:
    """(depth ids, prompt ids) of one repetition: the same for every engine with the same vocabulary."""
    vocab, avoid = engine.vocab_size(), engine.special_token_ids()
    return (synthetic_tokens(vocab, avoid, job.n_depth, rep_seed * 2 + 1),
            synthetic_tokens(vocab, avoid, job.n_prompt, rep_seed * 2))


def rep_seed(job: JobSpec, r: int) -> int:
    return job.seed * 100_003 + r


def prompt_ids_digest(engine: Engine, job: JobSpec) -> str:
    """sha256 of every repetition's depth and prompt ids (warmups included), in order."""
    h = hashlib.sha256()
    for r in range(job.warmup + job.repetitions):
        depth, prompt = repetition_ids(engine, job, rep_seed(job, r))
        h.update(json.dumps([depth, prompt], separators=(",", ":")).encode())
    return h.hexdigest()


def run_repetition(engine: Engine, job: JobSpec, rep_seed: int) -> dict[str, float]:
    depth, prompt = repetition_ids(engine, job, rep_seed)
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
        values = run_repetition(engine, job, rep_seed=rep_seed(job, r))
        samples.append(Sample(repetition=r - job.warmup, warmup=warm, values=values))
        if on_rep:
            on_rep(r, warm)
    return samples
