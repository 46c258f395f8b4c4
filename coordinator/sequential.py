"""A group-sequential comparison: look at a series after every few processes a side and stop once it is decided.

A fixed design runs ``COMPARE_PROCESSES`` (15) processes a side for every series, though most series are
decided long before: an A/A series whose ratio interval already sits inside the minimum effect, a real
slowdown whose every process is slower. Here the same test as ``significance.compare_processes`` (one value
per process, Mann-Whitney U, Hodges-Lehmann ratio with its Moses interval) is made at looks of
``LOOKS`` processes a side, and a series stops at the first look where

- **it is a verdict**: p below that look's share of alpha, and the ratio at least the minimum effect from 1.
  Alpha is spent over the looks by the Kim-DeMets power family alpha * t^1.5, t the fraction of the largest
  look (0.0096, 0.0176, 0.0228 at 5, 10, 15: the first look can still be reached by 5 processes a side,
  whose smallest p is 0.0079, and most is kept for the last, where a noisy series needs it); each look tests
  at its increment, so by the union bound the chance of any false verdict over all looks stays below alpha
  whatever the correlation between looks (conservative);
- **or it is settled as no change**: the ratio's 90% interval lies inside (1 - min effect, 1 + min effect),
  which is the two one-sided tests' equivalence at alpha 0.05 (TOST). Stopping that way can never make a
  false regression; it costs power only where a real change hides inside the interval, which
  ``benchmarks/regression_power.py`` measures.

At the last look the series ends either way (no change unless significant). The error rates and the
average processes a side are measured on real runs by ``benchmarks/regression_power.py``, beside the
fixed design's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .significance import (DEFAULT_ALPHA, DEFAULT_MIN_EFFECT, Comparison, Verdict, compare_processes, moses_interval,
                           pairwise_log_ratios, process_values)

LOOKS = (5, 10, 15)  # processes a side at each look; the last is the fixed design's COMPARE_PROCESSES


SPENDING_RHO = 1.5  # Kim-DeMets power family: rho 1 spends evenly, 3 is close to O'Brien-Fleming
EQUIVALENCE_LEVEL = 0.90  # TOST at alpha 0.05


def spent_alpha(t: float, alpha: float = DEFAULT_ALPHA, rho: float = SPENDING_RHO) -> float:
    """Kim-DeMets spending: the alpha spent by information fraction ``t`` (0..1)."""
    return alpha * min(max(t, 0.0), 1.0) ** rho


def look_alphas(looks: Sequence[int] = LOOKS, alpha: float = DEFAULT_ALPHA) -> list[float]:
    """Each look's nominal alpha: the increment of the spending function (they sum to ``alpha``)."""
    spent = [spent_alpha(n / looks[-1], alpha) for n in looks]
    return [s - (spent[i - 1] if i else 0.0) for i, s in enumerate(spent)]


def _equivalent(baseline, candidate, min_effect: float) -> bool:
    """The ratio's EQUIVALENCE_LEVEL interval (Moses, on the per-process values) sits inside the minimum effect."""
    b, c = process_values(baseline), process_values(candidate)
    if not b or not c or not all(v > 0 for v in b + c):
        return False
    bounds = moses_interval(pairwise_log_ratios(b, c), len(b), len(c), level=EQUIVALENCE_LEVEL)
    return bounds is not None and math.log(1.0 - min_effect) < bounds[0] and bounds[1] < math.log(1.0 + min_effect)


@dataclass
class Decision:
    verdict: Verdict
    processes: int  # a side, when the series stopped (or all there were, if undecided)
    look: int  # 1-based index into the looks; 0 if no look was reached
    decided: bool  # False: more processes would be run
    comparison: Comparison | None


def decide(baseline: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]], metric: str, *,
           looks: Sequence[int] = LOOKS, alpha: float = DEFAULT_ALPHA,
           min_effect: float = DEFAULT_MIN_EFFECT) -> Decision:
    """Run the looks the processes given allow (in their order: the interleaved protocol's) and say where it
    stopped. With fewer processes than the next look needs, ``decided`` is False: run more."""
    n = min(len(baseline), len(candidate))
    last: Comparison | None = None
    for i, (size, a) in enumerate(zip(looks, look_alphas(looks, alpha)), start=1):
        if size > n:
            return Decision(Verdict.insufficient, n, i - 1, False, last)
        last = compare_processes(baseline[:size], candidate[:size], metric, alpha=a, min_effect=min_effect)
        if last.verdict in (Verdict.regression, Verdict.improvement):
            return Decision(last.verdict, size, i, True, last)
        inside = _equivalent(baseline[:size], candidate[:size], min_effect)
        if inside or i == len(looks):
            return Decision(Verdict.no_change, size, i, True, last)
    return Decision(Verdict.insufficient, n, 0, False, last)
