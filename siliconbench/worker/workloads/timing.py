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

# The GPU's energy counter (NVML) moves in steps of ~10 to 100 ms, so a region is read over a window of at least this
# long: the region repeated back to back (a p512 prefill lasts ~12 ms on an H100 and would read 0 or double).
ENERGY_WINDOW_S = 1.0


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
    siliconbench.worker.platform.nvidia.DeviceMeter) adds the device memory peak; energy is read apart, over
    windows long enough for the counter (``energy_windows``), never inside these timed regions."""
    if meter is not None:
        meter.reset_peak()
    clock = time.perf_counter
    t0 = clock()
    logits = engine.prefill(prompt)
    t1 = clock()
    first = engine.first_token(logits)
    t2 = clock()
    engine.decode(first, n_gen)
    t3 = clock()

    values = {
        "prefill_tps": len(prompt) / (t1 - t0),
        "ttft_ms": (t2 - t0) * 1000.0,
        "decode_tps": n_gen / (t3 - t2),
        **engine.counters(),
        **engine.repetition_memory(),
    }
    if meter is not None:
        values["device_memory_peak_bytes"] = meter.repetition_peak()
    return values


def energy_windows(engine: Engine, prompt: list[int], n_gen: int, kept: int, meter, window_s: float = ENERGY_WINDOW_S):
    """Joules per token of the repetition's prefill and of its decode, each read over one window of at least
    ``window_s``: the prefill repeated back to back (the cache rewound to its first ``kept`` tokens, the depth,
    before each), then the n_gen decode steps repeated from the same position (rewound to depth + prompt). The
    counter is read at the windows' edges only; the rewinds (a few µs) sit inside them. Empty where the engine
    cannot rewind its cache or the counter did not move."""
    if not engine.can_rewind():
        return {}
    clock = time.perf_counter
    k, e0, t0 = 0, meter.energy_mj(), clock()
    while not k or clock() - t0 < window_s:
        engine.rewind(kept)
        engine.prefill(prompt)
        k += 1
    e1, t1 = meter.energy_mj(), clock()
    engine.rewind(kept)
    first = engine.first_token(engine.prefill(prompt))
    start = kept + len(prompt)
    m, e2, t2 = 0, meter.energy_mj(), clock()
    while n_gen and (not m or clock() - t2 < window_s):
        engine.rewind(start)
        engine.decode(first, n_gen)
        m += 1
    e3, t3 = meter.energy_mj(), clock()
    out: dict[str, float] = {}
    if None not in (e0, e1) and e1 > e0:
        out["prefill_j_per_token"] = (e1 - e0) / 1000 / (k * len(prompt))
        out["prefill_gpu_watts"] = (e1 - e0) / 1000 / (t1 - t0)
    if m and None not in (e2, e3) and e3 > e2:
        out["decode_j_per_token"] = (e3 - e2) / 1000 / (m * n_gen)
        out["decode_tokens_per_j"] = m * n_gen / ((e3 - e2) / 1000)
        out["decode_gpu_watts"] = (e3 - e2) / 1000 / (t3 - t2)
    return out
