"""The timed core every generating workload shares: seeded synthetic prompts and one prefill → first token →
decode repetition, timed the way llama-bench and mlx_lm.benchmark time theirs (regions: siliconbench.contract.metrics).

Prompts: ids drawn uniformly from the vocabulary minus ``Engine.special_token_ids()`` (one rule for both
engines), with no BOS for either engine. llama-bench puts BOS first when the vocabulary asks for one and
mlx_lm.benchmark never does; one token of a prompt does not move a throughput figure, and the same ids for both
engines matter more.
"""

from __future__ import annotations

import random
import time

from siliconbench.contract.jobs import JobSpec

from siliconbench.worker.engines.base import Engine

# The GPU's energy counter (NVML) is read around a region only if the region lasts this long: the counter moves
# in steps of a few to tens of ms, so a 10 ms prefill reads 0 or double.
ENERGY_MIN_S = 0.25


def synthetic_tokens(vocab_size: int, avoid: set[int], n: int, seed: int) -> list[int]:
    """n token ids drawn uniformly from the vocabulary minus control tokens; same seed, same ids."""
    rng = random.Random(seed)
    out: list[int] = []
    while len(out) < n:
        t = rng.randrange(vocab_size)
        if t not in avoid:
            out.append(t)
    return out


def rep_seed(job: JobSpec, r: int) -> int:
    """The seed of repetition r (warmups counted) of ``job``: the same on every engine."""
    return job.seed * 100_003 + r


def prompt_ids(engine: Engine, n: int, seed: int) -> list[int]:
    """The prompt of a repetition whose seed is ``seed``; its depth's ids use ``depth_ids``."""
    return synthetic_tokens(engine.vocab_size(), engine.special_token_ids(), n, seed * 2)


def depth_ids(engine: Engine, n: int, seed: int) -> list[int]:
    return synthetic_tokens(engine.vocab_size(), engine.special_token_ids(), n, seed * 2 + 1)


def timed_generation(engine: Engine, prompt: list[int], n_gen: int, meter=None) -> dict[str, float]:
    """Prefill ``prompt`` into the engine's current cache, choose the first token, decode ``n_gen`` more: the
    values of prefill_tps, ttft_ms, decode_tps, the engine's own counters and memory. ``meter`` (a CUDA host's
    siliconbench.worker.platform.nvidia.DeviceMeter) adds the device memory peak and, for regions long enough to read, joules
    per token: its energy readings sit outside the timed regions (before t0, after t2, after t3), so prefill's
    energy includes choosing the first token."""
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
    engine.decode(first, n_gen)
    t3 = clock()
    e3 = meter.energy_mj() if meter is not None else None

    values = {
        "prefill_tps": len(prompt) / (t1 - t0),
        "ttft_ms": (t2 - t0) * 1000.0,
        "decode_tps": n_gen / (t3 - t2e),
        **engine.counters(),
        **engine.repetition_memory(),
    }
    if meter is not None:
        values.update(energy_values(len(prompt), n_gen, e0, e1, e3, t2 - t0, t3 - t2e))
        values["device_memory_peak_bytes"] = meter.repetition_peak()
    return values


def energy_values(n_prompt: int, n_gen: int, e0, e1, e3, prefill_s: float, decode_s: float) -> dict[str, float]:
    out: dict[str, float] = {}
    if None in (e0, e1, e3):
        return out
    if prefill_s >= ENERGY_MIN_S and e1 > e0:
        out["prefill_j_per_token"] = (e1 - e0) / 1000 / n_prompt
    if decode_s >= ENERGY_MIN_S and e3 > e1 and n_gen:
        out["decode_j_per_token"] = (e3 - e1) / 1000 / n_gen
        out["decode_tokens_per_j"] = n_gen / ((e3 - e1) / 1000)
    return out
