"""A group-sequential comparison: look at a series after a few processes a side and stop once it is decided.

A fixed design runs ``COMPARE_PROCESSES`` (15) processes a side for every series, though most series are
decided long before: an A/A series whose ratio interval already sits inside the minimum effect, a real
slowdown whose every process is slower. Here the same test as ``significance.compare_processes`` (one value
per process, Mann-Whitney U, Hodges-Lehmann ratio with its Moses interval) is made at looks of
``LOOKS`` (5, 8, 11, 15) processes a side, in the order the interleaved protocol ran them, and a series stops
at the first look where

- **it is a verdict**: p below that look's nominal alpha, and the ratio at least the minimum effect from 1.
  The nominal alphas are a Lan-DeMets group-sequential boundary: Kim-DeMets power spending, alpha * t^1.5
  (t = processes / the last look's), and each look's two-sided bound chosen so that the chance of crossing
  *first* there, under no change, is that look's increment of the spending function. The chance is computed
  on the canonical joint distribution of the looks' z-statistics (Brownian motion in the information, here
  the processes a side: corr(Z_i, Z_j) = sqrt(n_i / n_j)), the asymptotic law of Mann-Whitney's U on nested
  samples, by the recursive numerical integration of Armitage, McPherson and Rowe (Jennison & Turnbull,
  *Group Sequential Methods*, ch. 19; ``tests/coordinator/test_sequential.py`` checks it against
  ``scipy.stats.multivariate_normal``). So the false verdicts over all looks sum to alpha (0.05), not more.
  That gives 0.0096, 0.0136, 0.0198, 0.0319 at 5, 8, 11, 15 (the first still reachable by 5 processes a
  side, whose smallest exact p is 0.0079; a discrete exact p that cannot reach its look's bound only makes
  the test more conservative). The union bound (nominals summing to alpha) would have left 0.0228 at 15;
- **or it is settled as equivalent**: the ratio's 90% interval (Moses) lies inside (1 - min effect,
  1 + min effect), the two one-sided tests' equivalence at 0.05 a side (TOST, ``significance.classify``). It is a
  futility stop: it can never make a false regression (the verdict boundaries above hold whatever stops early as
  equivalent); it costs power only where a real change hides inside the interval, which
  ``benchmarks/regression_power.py`` measures.

At the last look the series ends either way: a change, equivalent, or **inconclusive** (neither: the comparison
says how many processes a side the observed effect and noise would need). Never "no change" for "could not
tell". Looks chosen on a saved 120-round run of ``benchmarks/regression_power.py`` among looks {5/10/15,
4/8/12/15, 3/6/9/12/15, 5/7/.../15, 4/6/.../15, every process from 4 or 5, 5/8/11/15, 6/9/12/15, and with a last
look at 20}, rho {1, 1.5, 2, 3} and interval levels {70, 80, 90%}; the equivalence level is now the textbook
TOST's 90% (one level for every verdict, fixed design and sequential alike).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from siliconbench.coordinator.stats.significance import (
    CHANGES,
    DEFAULT_ALPHA,
    DEFAULT_MIN_EFFECT,
    Comparison,
    Verdict,
    compare_processes,
)

LOOKS = (5, 8, 11, 15)  # processes a side at each look; the last is the fixed design's COMPARE_PROCESSES


def look_increment(look: int, looks: Sequence[int] = LOOKS) -> int:
    """The processes a side that look ``look`` (1-based) adds to the ones before it: what its sweep runs."""
    return looks[look - 1] - (looks[look - 2] if look > 1 else 0)


SPENDING_RHO = 1.5  # Kim-DeMets power family: rho 1 is close to Pocock, 3 to O'Brien-Fleming
GRID = 401  # points a look in the recursive integration (the z bounds agree with 1,601 points to 1e-5)


def spent_alpha(t: float, alpha: float = DEFAULT_ALPHA, rho: float = SPENDING_RHO) -> float:
    """Kim-DeMets spending: the alpha spent by information fraction ``t`` (0..1)."""
    return alpha * min(max(t, 0.0), 1.0) ** rho


def boundaries(
    looks: Sequence[int] = LOOKS, alpha: float = DEFAULT_ALPHA, rho: float = SPENDING_RHO, grid: int = GRID
) -> list[float]:
    """Each look's two-sided z bound c_k: under no change, P(first |Z| >= c at look k) = the spending increment."""
    return list(_boundaries(tuple(looks), float(alpha), float(rho), int(grid)))


@lru_cache(maxsize=32)
def _boundaries(looks: tuple[int, ...], alpha: float, rho: float, grid: int) -> tuple[float, ...]:
    # Imported here: scipy.stats alone costs ~1 s of CPU, and every `regressions`, `compare` and `bisect` call
    # imports this module, most (a refusal, a listing) without deciding anything.
    import numpy as np
    from scipy.optimize import brentq
    from scipy.stats import norm

    if not looks or list(looks) != sorted(set(looks)) or looks[0] < 1:
        raise ValueError(f"looks must be increasing positive process counts, got {looks}")
    info = [float(n) for n in looks]
    spent = [spent_alpha(n / info[-1], alpha, rho) for n in info]
    # S_k = Z_k sqrt(I_k) has independent normal increments of variance I_k - I_(k-1); carry the density of
    # the paths still running (|S| < c sqrt(I) at every look so far) on a grid, trapezoid weights folded in.
    xs = ws = None
    out = []
    for k, i_k in enumerate(info):
        sd = math.sqrt(i_k - (info[k - 1] if k else 0.0))
        target = spent[k] - (spent[k - 1] if k else 0.0)

        def crossing(c: float) -> float:
            b = c * math.sqrt(i_k)
            if xs is None:
                return 2.0 * norm.sf(b / sd)
            return float(np.sum(ws * (norm.sf((b - xs) / sd) + norm.cdf((-b - xs) / sd))))

        c = brentq(lambda c: crossing(c) - target, 0.0, 12.0, xtol=1e-9) if target > 0 else math.inf
        out.append(c)
        b = min(c, 12.0) * math.sqrt(i_k)
        x = np.linspace(-b, b, grid)
        w = np.full(grid, x[1] - x[0])
        w[0] = w[-1] = w[0] / 2
        dens = (
            norm.pdf(x / sd) / sd
            if xs is None
            else (ws[None, :] * norm.pdf((x[:, None] - xs[None, :]) / sd)).sum(axis=1) / sd
        )
        xs, ws = x, dens * w
    return tuple(out)


def look_alphas(looks: Sequence[int] = LOOKS, alpha: float = DEFAULT_ALPHA, rho: float = SPENDING_RHO) -> list[float]:
    """Each look's nominal two-sided alpha: a p below it at that look is significant (from ``boundaries``)."""
    return list(_look_alphas(tuple(looks), float(alpha), float(rho)))


@lru_cache(maxsize=32)
def _look_alphas(looks: tuple[int, ...], alpha: float, rho: float) -> tuple[float, ...]:
    from scipy.stats import norm

    return tuple(float(2.0 * norm.sf(c)) for c in boundaries(looks, alpha, rho))


@dataclass
class Decision:
    verdict: Verdict
    processes: int  # a side, when the series stopped (or all there were, if not stopped)
    look: int  # 1-based index into the looks; 0 if no look was reached
    decided: bool  # False: more processes would be run (the verdict is then inconclusive, for now)
    comparison: Comparison | None


def decide(
    baseline: Sequence[Sequence[float]],
    candidate: Sequence[Sequence[float]],
    metric: str,
    *,
    looks: Sequence[int] = LOOKS,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
) -> Decision:
    """Run the looks the processes given allow (in their order: the interleaved protocol's) and say where it
    stopped: a change or equivalent at any look, inconclusive at the last. With fewer processes than the next
    look needs, ``decided`` is False: run more."""
    n = min(len(baseline), len(candidate))
    last: Comparison | None = None
    for i, (size, a) in enumerate(zip(looks, look_alphas(looks, alpha), strict=True), start=1):
        if size > n:
            return Decision(Verdict.inconclusive, n, i - 1, False, last)
        last = compare_processes(baseline[:size], candidate[:size], metric, alpha=a, min_effect=min_effect)
        if last.verdict in CHANGES or last.verdict == Verdict.equivalent or i == len(looks):
            return Decision(last.verdict, size, i, True, last)
    return Decision(Verdict.inconclusive, n, 0, False, last)
