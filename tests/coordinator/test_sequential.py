"""The group-sequential design's rules on seeded process samples (its error rates on real runs are
benchmarks/regression_power.py's): the Lan-DeMets boundaries against scipy's multivariate normal, early stops
either way, and under the null no more false verdicts than alpha over all looks."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy.stats import mannwhitneyu, multivariate_normal, norm

from siliconbench.coordinator.stats.ranks import mann_whitney_p
from siliconbench.coordinator.stats.sequential import LOOKS, boundaries, decide, look_alphas, spent_alpha
from siliconbench.coordinator.stats.significance import DEFAULT_ALPHA, Verdict


def processes(n: int, level: float, cv: float, rng: random.Random, reps: int = 5) -> list[list[float]]:
    """n processes of ``reps`` repetitions: each process its own level (between-process noise) plus a little inside."""
    out = []
    for _ in range(n):
        centre = level * (1 + rng.gauss(0, cv))
        out.append([centre * (1 + rng.gauss(0, cv / 3)) for _ in range(reps)])
    return out


def _continue_probability(looks, bounds) -> float:
    """P(|Z_k| < c_k at every look) on the canonical joint distribution, by scipy's multivariate normal."""
    cov = np.array([[math.sqrt(min(a, b) / max(a, b)) for b in looks] for a in looks])
    c = np.array(bounds)
    return float(multivariate_normal(np.zeros(len(looks)), cov, seed=0).cdf(c, lower_limit=-c))


def test_the_boundaries_spend_alpha_as_the_spending_function_says():
    # Independent of the recursive integration: the chance of no crossing by look k is 1 - alpha(t_k).
    bounds = boundaries()
    assert len(bounds) == len(LOOKS)
    for k in range(1, len(LOOKS) + 1):
        assert _continue_probability(LOOKS[:k], bounds[:k]) == pytest.approx(
            1 - spent_alpha(LOOKS[k - 1] / LOOKS[-1]), abs=2e-4
        )
    assert bounds[0] == pytest.approx(norm.isf(spent_alpha(LOOKS[0] / LOOKS[-1]) / 2))  # the first look alone


def test_nominal_alphas_use_the_correlation_between_looks():
    alphas = look_alphas()
    assert alphas == sorted(alphas)  # most is kept for the last look, where a noisy series needs it
    assert alphas[0] > 2 / 252  # 5 a side (min p = 2 / C(10, 5)) can reach the first look's alpha at all
    assert sum(alphas) > DEFAULT_ALPHA  # nested looks overlap: the union bound would have wasted this
    assert alphas[-1] < DEFAULT_ALPHA  # but the looks still cost something at the end
    one = look_alphas((15,))
    assert one == [pytest.approx(DEFAULT_ALPHA)]  # a single look is the fixed design


def test_bad_looks_are_refused():
    with pytest.raises(ValueError):
        boundaries((10, 5))


def test_a_clear_slowdown_stops_at_the_first_look_as_a_regression():
    rng = random.Random(1)
    d = decide(processes(15, 100, 0.01, rng), processes(15, 90, 0.01, rng), "decode_tps")
    assert (d.verdict, d.processes, d.look, d.decided) == (Verdict.regression, LOOKS[0], 1, True)
    assert d.comparison.p_value < look_alphas()[0]
    assert d.comparison.ratio == pytest.approx(0.9, abs=0.02)


def test_a_quiet_a_a_is_settled_as_equivalent_early_and_a_noisy_one_runs_on():
    rng = random.Random(2)
    quiet = decide(processes(15, 100, 0.005, rng), processes(15, 100, 0.005, rng), "decode_tps")
    assert (quiet.verdict, quiet.processes, quiet.decided) == (Verdict.equivalent, LOOKS[0], True)
    noisy = decide(processes(15, 100, 0.06, rng), processes(15, 100, 0.06, rng), "decode_tps")
    assert noisy.processes > LOOKS[0] and noisy.decided


def test_too_few_processes_for_the_next_look_is_not_a_decision():
    rng = random.Random(3)
    d = decide(processes(LOOKS[1] - 1, 100, 0.06, rng), processes(LOOKS[1] - 1, 100, 0.06, rng), "decode_tps")
    assert not d.decided and d.verdict == Verdict.inconclusive and d.look in (0, 1)


def test_under_the_null_false_verdicts_over_all_looks_stay_below_alpha():
    rng = random.Random(4)
    runs = 600
    # Noise wide enough that the minimum effect alone would not stop false calls: the p-thresholds must.
    false = sum(
        decide(processes(15, 100, 0.08, rng), processes(15, 100, 0.08, rng), "decode_tps", min_effect=0.0).verdict
        in (Verdict.regression, Verdict.improvement)
        for _ in range(runs)
    )
    assert false / runs < DEFAULT_ALPHA


def test_a_real_step_outside_the_equivalence_margin_is_still_caught_and_rarely_needs_every_look():
    rng = random.Random(5)
    ds = [decide(processes(15, 100, 0.02, rng), processes(15, 95, 0.02, rng), "decode_tps") for _ in range(100)]
    assert sum(d.verdict == Verdict.regression for d in ds) >= 95
    assert sum(d.processes for d in ds) / len(ds) < LOOKS[-1] / 2


def test_the_mann_whitney_p_value_is_scipys():
    """ranks.mann_whitney_p (every verdict's p, ~70x faster) against scipy.stats.mannwhitneyu itself: exact and
    normal-approximation paths, ties, unequal and tiny sides."""
    rng = random.Random(7)
    for _ in range(400):
        n1, n2 = rng.randint(1, 20), rng.randint(1, 20)
        digits = rng.choice((0, 1, 9))  # 0 and 1: many ties
        x = [round(rng.gauss(0.0, 1.0), digits) for _ in range(n1)]
        y = [round(rng.gauss(0.4, 1.0), digits) for _ in range(n2)]
        theirs = float(mannwhitneyu(x, y, alternative="two-sided").pvalue)
        if theirs != theirs:  # nan: every value equal, where compare_processes says p = 1 itself
            continue
        assert mann_whitney_p(x, y) == pytest.approx(theirs, rel=1e-9, abs=1e-15), (x, y)
