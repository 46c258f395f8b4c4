"""A bisection driven on simulated processes: the real state machine (``siliconbench.coordinator.bisection.search``) and the
real decision code, with each process's figure drawn from a log-normal around its commit's true level.

The unit tests plant one situation each (a skipped culprit, a slide, two regressions, a short side); the error
budget (``benchmarks/bisection_power.py``) runs thousands of searches per cell. Higher is better (decode_tps): a
regression of 5% multiplies the level by 0.95 from the culprit on.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from siliconbench.coordinator.bisection.search import GOOD_END, Search

METRIC = "decode_tps"


def levels(commits: int, steps: dict[int, float] | None = None, slide: float = 0.0) -> list[float]:
    """True levels of the good end and each commit after it (index -1 first): ``steps`` {index: fraction lost at
    that commit}, ``slide`` a fraction lost spread evenly over every commit (a gradual slide)."""
    out, level = [100.0], 100.0
    for i in range(commits):
        level *= 1.0 - (steps or {}).get(i, 0.0)
        level *= (1.0 - slide) ** (1.0 / commits)
        out.append(level)
    return out


@dataclass
class Scenario:
    truth: list[float]  # index -1 first
    cv: float  # between processes
    unbuildable: set[int] = field(default_factory=set)
    failing: set[int] = field(default_factory=set)  # every job of these commits fails
    flaky: set[int] = field(default_factory=set)  # one process of these is lost at each look, and run again

    def level(self, index: int) -> float:
        return self.truth[index + 1]


def process(level: float, cv: float, rng: random.Random) -> list[float]:
    sigma = math.sqrt(math.log(1.0 + cv * cv))
    return [level * math.exp(rng.gauss(0.0, sigma))]  # the median at the level: what a comparison compares


def run(sc: Scenario, rng: random.Random, *, min_effect: float = 0.03, looks=None) -> Search:
    """One whole search on ``sc``: what a driver does, with processes drawn instead of run."""
    commits = [{"sha": f"{i:040x}", "label": f"c{i}"} for i in range(len(sc.truth) - 1)]
    return drive(Search(commits, METRIC, min_effect, **({"looks": list(looks)} if looks else {})), sc, rng)


def drive(s: Search, sc: Scenario, rng: random.Random) -> Search:
    """Run ``s`` to its end on ``sc`` (a search of real commits too: a dashboard test's stored bisection)."""
    samples: dict[int, list] = {}
    step = 0
    while (w := s.want()) is not None:
        bad = [i for i in w.sides if i in sc.unbuildable and i != GOOD_END]
        if bad:
            s.skip(bad[0], "did not build")
            continue
        if w.step != step:
            step, samples = w.step, {}
        for i in w.sides:
            have = samples.setdefault(i, [])
            if i in sc.failing:
                continue
            target = w.processes - (1 if i in sc.flaky and not s.retried else 0)
            while len(have) < target:
                have.append(process(sc.level(i), sc.cv, rng))
        s.observe(samples)
    return s
