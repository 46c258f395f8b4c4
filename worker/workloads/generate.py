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

from worker.engines.base import Engine


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


# The GPU's energy counter (NVML) is read around a region only if the region lasts this long: the counter moves
# in steps of a few to tens of ms, so a 10 ms prefill reads 0 or double.
ENERGY_MIN_S = 0.25


def run_repetition(engine: Engine, job: JobSpec, rep_seed: int, meter=None) -> dict[str, float]:
    """One repetition's values. ``meter`` (a CUDA host's worker.platform.nvidia.DeviceMeter) adds the device memory
    peak of the repetition and, for regions long enough to read, joules per token: its energy readings sit outside
    the timed regions (before t0, after t2, after t3), so prefill's energy includes choosing the first token."""
    depth, prompt = repetition_ids(engine, job, rep_seed)
    engine.reset()
    engine.fill(depth)
    if meter is not None:
        meter.reset_peak()
        e0 = meter.energy_mj()

    clock = time.perf_counter
    t0 = clock()
    logits = engine.prefill(prompt)
    t1 = clock()
    first = engine.first_token(logits)
    t2 = clock()
    e1 = meter.energy_mj() if meter is not None else None
    t2e = clock()
    engine.decode(first, job.n_gen)
    t3 = clock()
    e3 = meter.energy_mj() if meter is not None else None

    values = {
        "prefill_tps": job.n_prompt / (t1 - t0),
        "ttft_ms": (t2 - t0) * 1000.0,
        "decode_tps": job.n_gen / (t3 - t2e),
    }
    values.update(engine.counters())
    values.update(engine.repetition_memory())
    if meter is not None:
        values.update(energy_values(job, e0, e1, e3, t2 - t0, t3 - t2e))
        values["device_memory_peak_bytes"] = meter.repetition_peak()
    return values


def energy_values(job: JobSpec, e0, e1, e3, prefill_s: float, decode_s: float) -> dict[str, float]:
    out: dict[str, float] = {}
    if None in (e0, e1, e3):
        return out
    if prefill_s >= ENERGY_MIN_S and e1 > e0:
        out["prefill_j_per_token"] = (e1 - e0) / 1000 / job.n_prompt
    if decode_s >= ENERGY_MIN_S and e3 > e1 and job.n_gen:
        out["decode_j_per_token"] = (e3 - e1) / 1000 / job.n_gen
        out["decode_tokens_per_j"] = job.n_gen / ((e3 - e1) / 1000)
    return out


def run(engine: Engine, job: JobSpec, on_rep: Callable[[int, bool], None] | None = None,
        meter=None) -> list[Sample]:
    """Warmup then measured repetitions; the seed of repetition r is (job seed, r), shared by engines."""
    samples = []
    total = job.warmup + job.repetitions
    for r in range(total):
        warm = r < job.warmup
        if r and job.delay_s:
            time.sleep(job.delay_s)
        values = run_repetition(engine, job, rep_seed=rep_seed(job, r), meter=meter)
        samples.append(Sample(repetition=r - job.warmup, warmup=warm, values=values))
        if on_rep:
            on_rep(r, warm)
    return samples
