"""The group-sequential design's rules on seeded process samples (its error rates on real runs are
benchmarks/regression_power.py's): alpha spent over the looks, early stops either way, and under the null
no more false verdicts than alpha over all looks."""

from __future__ import annotations

import random

import pytest

from coordinator.sequential import LOOKS, decide, look_alphas
from coordinator.significance import DEFAULT_ALPHA, Verdict


def processes(n: int, level: float, cv: float, rng: random.Random, reps: int = 5) -> list[list[float]]:
    """n processes of ``reps`` repetitions: each process its own level (between-process noise) plus a little inside."""
    out = []
    for _ in range(n):
        centre = level * (1 + rng.gauss(0, cv))
        out.append([centre * (1 + rng.gauss(0, cv / 3)) for _ in range(reps)])
    return out


def test_alpha_is_spent_over_the_looks_and_sums_to_alpha():
    alphas = look_alphas()
    assert sum(alphas) == pytest.approx(DEFAULT_ALPHA)
    assert alphas == sorted(alphas)  # most is kept for the last look, where a noisy series needs it
    assert alphas[0] > 2 / 252  # 5 a side (min p = 2 / C(10, 5)) can reach the first look's alpha at all


def test_a_clear_slowdown_stops_at_the_first_look_as_a_regression():
    rng = random.Random(1)
    d = decide(processes(15, 100, 0.01, rng), processes(15, 90, 0.01, rng), "decode_tps")
    assert (d.verdict, d.processes, d.look, d.decided) == (Verdict.regression, LOOKS[0], 1, True)
    assert d.comparison.ratio == pytest.approx(0.9, abs=0.02)


def test_a_quiet_a_a_is_settled_as_no_change_early_and_a_noisy_one_runs_on():
    rng = random.Random(2)
    quiet = decide(processes(15, 100, 0.005, rng), processes(15, 100, 0.005, rng), "decode_tps")
    assert (quiet.verdict, quiet.processes, quiet.decided) == (Verdict.no_change, LOOKS[0], True)
    noisy = decide(processes(15, 100, 0.06, rng), processes(15, 100, 0.06, rng), "decode_tps")
    assert noisy.processes > LOOKS[0] and noisy.decided


def test_too_few_processes_for_the_next_look_is_not_a_decision():
    rng = random.Random(3)
    d = decide(processes(7, 100, 0.06, rng), processes(7, 100, 0.06, rng), "decode_tps")
    assert not d.decided and d.verdict == Verdict.insufficient and d.look in (0, 1)


def test_under_the_null_false_verdicts_over_all_looks_stay_below_alpha():
    rng = random.Random(4)
    runs = 600
    # Noise wide enough that the minimum effect alone would not stop false calls: the p-thresholds must.
    false = sum(decide(processes(15, 100, 0.08, rng), processes(15, 100, 0.08, rng), "decode_tps", min_effect=0.0)
                .verdict in (Verdict.regression, Verdict.improvement) for _ in range(runs))
    assert false / runs < DEFAULT_ALPHA
