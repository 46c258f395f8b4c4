"""Every rule of the bisection's state machine on synthetic process lists (``harness.bisection_sim``), in
milliseconds: the real ``Search`` and ``decide``, the processes drawn instead of run."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.bisection_sim import METRIC, Scenario, levels, process, run
from siliconbench.coordinator.bisection.search import (
    AMBIGUOUS,
    EQUIVALENT,
    EXIT_CODES,
    FAILED,
    FOUND,
    GOOD_END,
    IMPROVEMENT,
    INCONCLUSIVE,
    Search,
)
from siliconbench.coordinator.stats.sequential import decide
from siliconbench.coordinator.stats.significance import Verdict, compare_processes

ROOT = Path(__file__).resolve().parents[2]
QUIET = 0.005  # CV between processes: every verdict is clear


def test_a_clear_step_is_found_and_confirmed_with_both_effects():
    s = run(Scenario(levels(16, {9: 0.2}), QUIET), random.Random(1))
    assert (s.outcome, s.first_bad, s.exit_code) == (FOUND, 9, 0)
    assert s.steps[-1]["kind"] == "confirm" and s.steps[-1]["verdict"] == "regression"
    assert s.effect["ratio"] == pytest.approx(0.8, abs=0.01) and s.effect["ci_high"] < 1
    assert s.effect_from_good["ratio"] == pytest.approx(0.8, abs=0.01)
    assert "re-measured" in s.reason and s.processes_run > 0


def test_a_skipped_neighbour_makes_the_answer_ambiguous_never_a_blame():
    s = run(Scenario(levels(16, {6: 0.2}), QUIET, unbuildable={6}), random.Random(2))
    assert s.outcome == AMBIGUOUS and s.first_bad is None and s.exit_code == 4
    assert s.suspects == [6, 7]  # the skipped commit and the first bad measured after it, as git bisect lists them
    assert "one of c6, c7" in s.reason and any(x["index"] == 6 and "did not build" in x["reason"] for x in s.skipped)


def test_every_commit_between_skipped_lists_them_all():
    s = run(Scenario(levels(6, {2: 0.2}), QUIET, unbuildable={0, 1, 2, 3, 4}), random.Random(3))
    assert s.outcome == AMBIGUOUS and s.suspects == [0, 1, 2, 3, 4, 5]


def test_a_gradual_slide_of_small_steps_is_never_found():
    rng = random.Random(4)
    for _ in range(10):
        s = run(Scenario(levels(16, slide=0.15), 0.01), rng)
        assert s.outcome != FOUND, s.reason


def test_a_step_below_the_minimum_effect_is_not_found():
    rng = random.Random(5)
    outcomes = {run(Scenario(levels(8, {3: 0.015}), 0.01), rng).outcome for _ in range(10)}
    assert FOUND not in outcomes and outcomes <= {EQUIVALENT, INCONCLUSIVE, AMBIGUOUS}


def test_a_false_step_is_caught_by_the_confirmation():
    """A midpoint before the real step reads bad once (a disturbed run): the search closes in on it, and the
    confirmation, re-measured, does not reproduce it: inconclusive, nobody blamed."""
    rng = random.Random(6)
    truth = levels(16, {12: 0.2})
    s = Search([{"sha": f"{i:040x}", "label": f"c{i}"} for i in range(16)], METRIC, 0.03)
    lied = False
    while (w := s.want()) is not None:
        samples = {}
        for i in w.sides:
            level = truth[i + 1]
            if w.kind == "midpoint" and i == s.index and not lied:
                level *= 0.8  # this one step's processes were disturbed
            samples[i] = [process(level, QUIET, rng) for _ in range(w.processes)]
        if w.kind == "midpoint" and s.index is not None:
            mid = s.index
            s.observe(samples)
            lied = lied or s.hi == mid
            continue
        s.observe(samples)
    assert lied and s.outcome == INCONCLUSIVE and s.first_bad is None
    assert "not a regression" in s.reason and s.steps[-1]["kind"] == "confirm"


def test_two_regressions_are_both_said():
    s = run(Scenario(levels(16, {4: 0.15, 11: 0.15}), QUIET), random.Random(7))
    assert s.outcome == FOUND and s.first_bad == 4
    assert any("a second regression after" in n for n in s.notes), s.notes


def test_a_short_side_is_run_again_once_then_the_commit_is_skipped_and_named():
    flaky = run(Scenario(levels(8, {5: 0.2}), QUIET, flaky={3}), random.Random(8))
    assert flaky.outcome == FOUND and flaky.first_bad == 5 and any("run again" in n for n in flaky.notes)
    failing = run(Scenario(levels(8, {5: 0.2}), QUIET, failing={3}), random.Random(8))
    assert failing.outcome == FOUND and failing.first_bad == 5  # 3 was only a midpoint on the good side
    aside = [x for x in failing.skipped if x["index"] == 3]
    assert aside and "jobs failed" in aside[0]["reason"] and not aside[0]["undecided"]
    assert [st["verdict"] for st in failing.steps if st["index"] == 3] == ["skipped"]


def test_an_end_that_cannot_be_measured_fails_the_search():
    s = run(Scenario(levels(8, {5: 0.2}), QUIET, failing={7}), random.Random(9))
    assert s.outcome == FAILED and s.exit_code == 1 and "short" in s.reason


def test_the_ends_answer_in_four_words():
    rng = random.Random(10)
    assert run(Scenario(levels(8), QUIET), rng).outcome == EQUIVALENT
    assert run(Scenario(levels(8, {3: -0.2}), QUIET), rng).outcome == IMPROVEMENT
    noisy = run(Scenario(levels(8, {3: 0.02}), 0.15), rng)
    assert noisy.outcome == INCONCLUSIVE and noisy.steps[0]["processes"] == noisy.looks[-1]
    assert "processes a side would resolve it" in noisy.reason and len(noisy.steps) == 1
    assert {EXIT_CODES[o] for o in (FOUND, FAILED, INCONCLUSIVE, AMBIGUOUS, EQUIVALENT, IMPROVEMENT)} == {
        0,
        1,
        3,
        4,
        5,
        6,
    }


def test_an_undecided_midpoint_is_set_aside_not_guessed():
    """The first midpoint runs in wild noise (a host that was busy throughout): neither bad nor good at the last
    look, it is set aside as undecided (never guessed) and the search goes on; as it lies before the last good
    commit, the answer is still one commit."""
    rng = random.Random(11)
    truth = levels(8, {5: 0.2})
    s = Search([{"sha": f"{i:040x}", "label": f"c{i}"} for i in range(8)], METRIC, 0.03)
    first = None
    while (w := s.want()) is not None:
        if w.kind == "midpoint" and first is None:
            first = s.index
        noisy = {i: 1.0 if (w.kind == "midpoint" and i == first == s.index) else QUIET for i in w.sides}
        s.observe({i: [process(truth[i + 1], noisy[i], rng) for _ in range(w.processes)] for i in w.sides})
    undecided = [x for x in s.skipped if x["undecided"]]
    assert [x["index"] for x in undecided] == [first] and "undecided at the last look" in undecided[0]["reason"]
    assert [st["verdict"] for st in s.steps if st["index"] == first and st["kind"] == "midpoint"] == ["undecided"]
    assert s.outcome == FOUND and s.first_bad == 5 and s.lo == 4 and first < s.lo


def test_a_search_resumes_from_its_kept_state():
    rng = random.Random(12)
    sc = Scenario(levels(32, {20: 0.2}), QUIET)
    s = Search([{"sha": f"{i:040x}"} for i in range(32)], METRIC, 0.03)
    for _ in range(3):  # three looks or steps, then the process "stops"
        w = s.want()
        s.observe({i: [process(sc.level(i), QUIET, rng) for _ in range(w.processes)] for i in w.sides})
    again = Search.from_dict(s.as_dict())
    assert again.as_dict() == s.as_dict()
    while (w := again.want()) is not None:
        again.observe({i: [process(sc.level(i), QUIET, rng) for _ in range(w.processes)] for i in w.sides})
    assert again.outcome == FOUND and again.first_bad == 20


def test_the_good_end_and_the_bad_end_cannot_be_skipped():
    s = Search([{"sha": "a" * 40}, {"sha": "b" * 40}], METRIC, 0.03)
    s.skip(GOOD_END, "did not build")
    assert s.outcome == FAILED and "cannot be measured" in s.reason


def test_last_look_neither_way_is_inconclusive_not_no_change():
    """decide at its last look: a 5% slowdown in 15% noise is neither significant nor inside the margin."""
    rng = random.Random(13)
    a = [process(100, 0.15, rng) for _ in range(15)]
    b = [process(95, 0.15, rng) for _ in range(15)]
    d = decide(a, b, METRIC)
    assert d.decided and d.verdict == Verdict.inconclusive
    c = d.comparison
    assert c.needed_processes and c.needed_processes > 15 and "would resolve it" in c.reason
    quiet = compare_processes([[100.0 + i * 0.01] for i in range(10)], [[100.0 + i * 0.01] for i in range(10)], METRIC)
    assert quiet.verdict == Verdict.equivalent and "inside ±3%" in quiet.reason


def test_the_processes_a_search_ran_are_counted_once():
    s = run(Scenario(levels(3, {1: 0.3}), QUIET), random.Random(14))
    assert s.outcome == FOUND
    ran = sum(len(st["sides"]) * st["processes"] for st in s.steps)  # each step stopped at its own look
    assert s.processes_run == ran, (s.processes_run, [(st["kind"], st["sides"], st["processes"]) for st in s.steps])
