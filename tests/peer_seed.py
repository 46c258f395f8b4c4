"""Seeded decode histories of a small fleet (numpy RNG, ~4% spread between processes, ~1% between hosts), some hosts slowed."""

from __future__ import annotations

import numpy as np

SKUS = {"a1": "A", "a2": "A", "a3": "A", "a4": "A", "b1": "B"}


def history(
    seed: int,
    slow: dict[str, float] | None = None,
    series: int = 3,
    processes: int = 6,
    cv: float = 0.04,
    hosts=tuple(SKUS),
) -> dict:
    """{series: {host: [processes' samples]}} of decode tok/s: process medians spread by ``cv``, repetitions
    inside a process by cv/3 (they agree more), each host off by ~1%, hosts in ``slow`` slower by that fraction."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in range(series):
        mu = 300.0 * (1 + s)
        out[f"s{s}"] = {}
        for h in hosts:
            level = mu * (1 - (slow or {}).get(h, 0.0)) * (1 + rng.normal(0, 0.01))
            out[f"s{s}"][h] = [
                list(level * (1 + rng.normal(0, cv)) * (1 + rng.normal(0, cv / 3, 3))) for _ in range(processes)
            ]
    return out
