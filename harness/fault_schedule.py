"""The fault campaign's seeded schedule: which process is killed or cut, and when (benchmarks/faults.py runs it;
tests/fleet/test_faults.py checks it)."""

from __future__ import annotations

import random


def schedule(
    rng: random.Random,
    *,
    worker_kills: int,
    broker_restarts: int,
    db_cut_s: float,
    reconciler_kills: int,
    window_s: float,
) -> list[tuple[float, str, int]]:
    """(time from the start, what, which worker) for every fault, uniformly over the window, sorted."""
    at = lambda: round(rng.uniform(5.0, max(5.0, window_s)), 1)  # noqa: E731
    events = [(at(), "kill worker", rng.randrange(2)) for _ in range(worker_kills)]
    events += [(at(), "kill broker", 0) for _ in range(broker_restarts)]
    events += [(at(), "kill reconciler", 0) for _ in range(reconciler_kills)]
    if db_cut_s > 0:
        t = round(rng.uniform(5.0, max(5.0, window_s - db_cut_s)), 1)
        events += [(t, "cut database", 0), (t + db_cut_s, "restore database", 0)]
    return sorted(events)
