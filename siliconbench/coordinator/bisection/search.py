"""One bisection as a state machine: what to measure next, and what the measurements mean. No I/O.

Both ways of running a bisection drive this one machine — ``siliconbench regressions bisect`` on this machine
(``siliconbench.embedded.bisect``) and the watch's scheduler on the fleet (``siliconbench.coordinator.watch.bisections``) — and both keep
its state (``Search.as_dict``) in the ``bisections`` table, so one set of rules decides every search and an
interrupted one resumes where it stopped. ``benchmarks/bisection_power.py`` runs it on simulated processes to
measure its error rates.

A driver asks ``want()`` for the next measurement (the commits of a step, by index: -1 is the good end, the last
index the bad end; and the processes a side the step needs by its next look), builds and measures them, and
hands every process of the step so far to ``observe``; a commit that does not build goes to ``skip``.

- **The ends**: good against bad, decided by ``sequential.decide`` at the bisection's looks. Only a regression
  starts the search; *equivalent*, *improvement* or *inconclusive* end it with that answer and its interval.
- **A midpoint** is measured between the current ends, the three interleaved. *Bad* when it is a regression
  against the last good; *good* when the first bad is a regression against it, or it is equivalent to the last
  good. Neither at the last look: it is *undecided*, set aside as a skipped commit is (never guessed), and the
  search goes on. When a bad midpoint is also a regression against the first bad, a **second regression** is
  noted (the search follows the first).
- **A short side** (jobs failed): its missing processes are run once more; still short, the commit is skipped
  and named (the ends or a confirmation: the search fails, with why).
- **The end**: with no commit left between the last good and the first bad, a **confirmation** step re-measures
  that pair afresh (with the good end beside them), decided by the ends' rule. *found* only when it is a
  regression; *ambiguous* when skipped or undecided commits sit between the two (every one listed, as git bisect
  does); otherwise *inconclusive*, with the confirmation's evidence. Nothing unmeasured is ever blamed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from siliconbench.coordinator.stats.sequential import LOOKS, Decision, decide, look_alphas
from siliconbench.coordinator.stats.significance import (
    DEFAULT_ALPHA,
    Comparison,
    Verdict,
    compare_processes,
    moses_interval,
    pairwise_log_ratios,
    process_values,
)

GOOD_END = -1
ENDS, MIDPOINT, CONFIRM, DONE = "ends", "midpoint", "confirm", "done"
BAD, GOOD, UNDECIDED, SKIPPED = "bad", "good", "undecided", "skipped"
# How a search ends (``outcome``), each with its exit status (docs/builds-and-bisection.md's table).
FOUND, AMBIGUOUS, EQUIVALENT, IMPROVEMENT, INCONCLUSIVE, FAILED = (
    "found",
    "ambiguous",
    "equivalent",
    "improvement",
    "inconclusive",
    "failed",
)
EXIT_CODES = {FOUND: 0, FAILED: 1, INCONCLUSIVE: 3, AMBIGUOUS: 4, EQUIVALENT: 5, IMPROVEMENT: 6}
# Processes a side at each look of every step: the watch's looks, then on to 40 (Pinpoint doubles to 160), so
# what 15 leave inconclusive can still be resolved; benchmarks/bisection_power.py shows what each costs.
BISECT_LOOKS = (*LOOKS, 20, 30, 40)
CONFIRM_ALPHA = 0.01  # the confirmation names a commit people revert: a stricter test than a step's 0.05


@dataclass
class Want:
    """The next measurement: these commits (indices; -1 the good end), interleaved, until each side has
    ``processes`` processes (all of this step so far)."""

    kind: str
    sides: list[int]
    processes: int
    look: int  # 1-based: the look these processes reach
    step: int  # 1-based: which step of the search (a driver names its sweeps by it)


def _evidence(d: Decision | None) -> dict | None:
    return d.comparison.as_dict() if d is not None and d.comparison is not None else None


@dataclass
class Search:
    commits: list[dict]  # after the good end up to the bad end, oldest first: {sha, number, subject, ...}
    metric: str
    min_effect: float
    looks: list[int] = field(default_factory=lambda: list(BISECT_LOOKS))
    lo: int = GOOD_END  # the last good commit
    hi: int | None = None  # the first bad commit (the bad end until a midpoint is bad)
    phase: str = ENDS
    index: int | None = None  # the midpoint being measured
    look: int = 0  # looks finished in the current step
    retried: bool = False  # the current step's short side was run again once
    skipped: list[dict] = field(default_factory=list)  # {index, reason, undecided}
    steps: list[dict] = field(default_factory=list)  # every finished step's evidence
    notes: list[str] = field(default_factory=list)  # a second regression, a retried short side
    outcome: str | None = None
    reason: str = ""  # the outcome in a sentence: what it rests on, what would resolve it
    first_bad: int | None = None
    suspects: list[int] = field(default_factory=list)  # ambiguous: every commit that may be the first bad
    effect: dict | None = None  # last good -> first bad (the confirmation), or the ends' comparison
    effect_from_good: dict | None = None  # good end -> first bad (the confirmation)
    processes_run: int = 0  # every side's processes over the search: what it cost
    confirm_alpha: float = CONFIRM_ALPHA
    other_path: str = ""  # the finding was measured another way than the search measures (e.g. "the binding")

    def __post_init__(self) -> None:
        if not self.commits:
            raise ValueError("a bisection needs at least one commit after the good end")
        if self.hi is None:
            self.hi = len(self.commits) - 1
        self.looks = list(self.looks)

    # -- what to measure ------------------------------------------------------------------------------------
    def sides(self) -> list[int]:
        if self.phase == ENDS:
            return [GOOD_END, len(self.commits) - 1]
        if self.phase == MIDPOINT:
            return [self.lo, self.index, self.hi]
        if self.phase == CONFIRM:
            return [GOOD_END, self.lo, self.hi] if self.lo != GOOD_END else [self.lo, self.hi]
        return []

    def want(self) -> Want | None:
        if self.phase == DONE:
            return None
        return Want(self.phase, self.sides(), self.looks[self.look], self.look + 1, len(self.steps) + 1)

    @property
    def done(self) -> bool:
        return self.phase == DONE

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.outcome or FAILED, 1)

    # -- what was measured ----------------------------------------------------------------------------------
    def observe(self, samples: dict[int, Sequence[Sequence[float]]]) -> None:
        """Every process of the current step so far, by commit index, in the order they ran."""
        w = self.want()
        if w is None:
            raise ValueError("the bisection is done: nothing to observe")
        got = {i: list(samples.get(i) or []) for i in w.sides}
        short = {i: len(v) for i, v in got.items() if len(v) < w.processes}
        if short:
            if not self.retried:
                self.retried = True  # the caller runs the missing processes once more: the same want()
                self.notes.append(f"step {w.step}: a short side ({self._short(short, w)}) was run again")
                return
            return self._short_side(w, short)
        got = {i: v[: w.processes] for i, v in got.items()}
        self.look, self.retried = self.look + 1, False
        {ENDS: self._ends, MIDPOINT: self._midpoint, CONFIRM: self._confirm}[self.phase](got)

    def skip(self, index: int, reason: str) -> None:
        """``index`` cannot be measured (it did not build): set aside and named; an end cannot be skipped."""
        if index in (GOOD_END, len(self.commits) - 1) or self.phase in (ENDS, CONFIRM):
            return self._finish(FAILED, f"{self.label(index)} cannot be measured: {reason}")
        self._set_aside(index, reason, undecided=False)
        self._advance()

    def fail(self, reason: str) -> None:
        """The driver cannot go on (a build never reported, a look never finished): the search ends, saying why."""
        self._finish(FAILED, reason)

    # -- the rules ------------------------------------------------------------------------------------------
    def _decide(self, a, b, alpha: float = DEFAULT_ALPHA) -> Decision:
        """At the look just reached: the sides hold exactly its processes, the boundaries are the whole schedule's."""
        return decide(a, b, self.metric, looks=self.looks, min_effect=self.min_effect, alpha=alpha)

    def _last_look(self) -> bool:
        return self.look >= len(self.looks)

    def _ends(self, got: dict) -> None:
        d = self._decide(got[GOOD_END], got[len(self.commits) - 1])
        if not d.decided and not self._last_look():
            return
        self._record(ENDS, len(self.commits) - 1, d.verdict.value, d, None)
        self.effect = _evidence(d)
        if d.verdict == Verdict.regression:
            return self._advance()
        word = {Verdict.equivalent: EQUIVALENT, Verdict.improvement: IMPROVEMENT}.get(d.verdict, INCONCLUSIVE)
        why = f"the ends are {d.verdict.value}: {d.comparison.reason if d.comparison else ''}"
        if self.other_path:  # what did not show here may still be there on the finding's own path
            why = f"not reproduced through llama-bench (the finding was measured through {self.other_path}); {why}"
        self._finish(word, why)

    def _midpoint(self, got: dict) -> None:
        d1 = self._decide(got[self.lo], got[self.index])
        d2 = self._decide(got[self.index], got[self.hi])
        verdict = None
        if d1.verdict == Verdict.regression:
            verdict = BAD
        elif d2.verdict == Verdict.regression or d1.verdict == Verdict.equivalent:
            verdict = GOOD
        if verdict is None and not self._last_look():
            return
        mid = self.index
        self._record(MIDPOINT, mid, verdict or UNDECIDED, d1, d2)
        if verdict == BAD:
            if d2.verdict == Verdict.regression:
                self.notes.append(
                    f"a second regression after {self.label(mid)}: {self.label(mid)} -> {self.label(self.hi)} "
                    f"{_ratio(d2)} (the search follows the first)"
                )
            self.hi = mid
        elif verdict == GOOD:
            self.lo = mid
        else:
            why = d1.comparison.reason if d1.comparison else "no comparison"
            self._set_aside(mid, f"undecided at the last look ({self.looks[-1]} processes a side): {why}", True)
        self._advance()

    def _confirm(self, got: dict) -> None:
        d = self._decide(got[self.lo], got[self.hi], self.confirm_alpha)
        if not d.decided and not self._last_look():
            return
        # The step it names must be shown beyond the minimum effect (its interval wholly past the margin), not only
        # significant with a point estimate past it: a culprit is reverted on this figure.
        now = compare_processes(got[self.lo], got[self.hi], self.metric, min_effect=self.min_effect)
        # Tested at every look, so each look's interval is at its group-sequential level (the looks' nominal
        # alphas spend 0.05 in all): looking again cannot inflate the chance of naming a step below the margin.
        level = 1.0 - look_alphas(self.looks)[self.look - 1]
        beyond = d.verdict == Verdict.regression and _beyond_margin(
            got[self.lo], got[self.hi], now, level, self.min_effect
        )
        if d.verdict == Verdict.regression and not beyond and not self._last_look():
            return  # more processes can show it beyond the margin, or not
        from_good = self._decide(got[GOOD_END], got[self.hi]) if self.lo != GOOD_END else d
        self._record(CONFIRM, self.hi, d.verdict.value, d, None)
        self.steps[-1]["from_good"] = _evidence(from_good)
        self.steps[-1]["all_processes"] = now.as_dict()
        self.effect, self.effect_from_good = now.as_dict(), _evidence(from_good)
        pair = f"{self.label(self.lo)} -> {self.label(self.hi)}"
        if d.verdict != Verdict.regression:
            why = d.comparison.reason if d.comparison else ""
            return self._finish(INCONCLUSIVE, f"re-measured, {pair} is {d.verdict.value}, not a regression: {why}")
        if not beyond:
            return self._finish(
                INCONCLUSIVE,
                f"re-measured, {pair} is a regression {_ratio_of(now)} but its interval does not lie wholly "
                f"beyond the {self.min_effect:.0%} minimum effect"
                + (
                    f"; about {n} processes a side would show it if it is there"
                    if (n := _needed_beyond(now, self.min_effect))
                    else ""
                ),
            )
        between = sorted(s["index"] for s in self.skipped if self.lo < s["index"] < self.hi)
        if between:
            self.suspects = [*between, self.hi]
            names = ", ".join(self.label(i) for i in self.suspects)
            return self._finish(
                AMBIGUOUS, f"{pair} is a regression {_ratio_of(now)}; the first bad commit is one of {names}"
            )
        self.first_bad = self.hi
        self._finish(FOUND, f"{pair} re-measured: a regression {_ratio_of(now)}, beyond the minimum effect")

    def _advance(self) -> None:
        """The next midpoint (the middle of the commits still in question), or the confirmation."""
        aside = {s["index"] for s in self.skipped}
        inside = [i for i in range(self.lo + 1, self.hi) if i not in aside]
        self.look, self.retried = 0, False
        if inside:
            self.phase, self.index = MIDPOINT, inside[len(inside) // 2]
        else:
            self.phase, self.index = CONFIRM, None

    def _short_side(self, w: Want, short: dict[int, int]) -> None:
        why = f"its jobs failed: {self._short(short, w)}, run again once"
        if self.phase == MIDPOINT:
            self._record(MIDPOINT, self.index, SKIPPED, None, None, note=why)
            self._set_aside(self.index, why, undecided=False)
            return self._advance()
        self._finish(FAILED, f"step {w.step} ({self.phase}) is short: {why}")

    def _short(self, short: dict[int, int], w: Want) -> str:
        return ", ".join(f"{self.label(i)} {n} of {w.processes}" for i, n in short.items())

    def _set_aside(self, index: int, reason: str, undecided: bool) -> None:
        self.skipped = [s for s in self.skipped if s["index"] != index]
        self.skipped.append({"index": index, "reason": reason[:400], "undecided": undecided})

    def _record(self, kind: str, index: int, verdict: str, d1: Decision | None, d2: Decision | None, note=""):
        if self.look:  # the step's processes, each counted once (every side ran the last look's count)
            self.processes_run += len(self.sides()) * self.looks[self.look - 1]
        self.steps.append(
            {
                "kind": kind,
                "index": index,
                "sides": self.sides(),
                "verdict": verdict,
                "processes": min(d.processes for d in (d1, d2) if d is not None) if d1 or d2 else 0,
                "looks": self.look,
                "against_good": _evidence(d1),
                "against_bad": _evidence(d2),
                "note": note,
            }
        )

    def _finish(self, outcome: str, reason: str) -> None:
        self.phase, self.outcome, self.reason, self.index = DONE, outcome, reason, None

    # -- keeping it -----------------------------------------------------------------------------------------
    def label(self, index: int) -> str:
        if index == GOOD_END:
            return "the good end"
        c = self.commits[index]
        return str(c.get("label") or c.get("sha", "")[:12] or f"commit {index}")

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Search:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def _beyond_margin(lo, hi, c: Comparison, level: float, min_effect: float) -> bool:
    """The ratio's ``level`` interval (Moses) lies wholly past the minimum effect on the regression's side."""
    b, v = process_values(lo), process_values(hi)
    if not b or not v or not all(x > 0 for x in b + v):
        return False
    bounds = moses_interval(pairwise_log_ratios(b, v), len(b), len(v), level=level)
    if bounds is None:
        return False
    if c.better == "higher":
        return bounds[1] < math.log(1.0 - min_effect)
    return bounds[0] > math.log(1.0 + min_effect)


def _needed_beyond(c: Comparison, min_effect: float) -> int | None:
    """Processes a side that would put the interval past the margin at the observed effect and noise."""
    n = min(c.n_baseline, c.n_candidate)
    if c.ratio is None or c.ci_low is None or not n:
        return None
    past = abs(math.log(c.ratio)) - abs(math.log(1.0 - min_effect if c.better == "higher" else 1.0 + min_effect))
    half = (math.log(c.ci_high) - math.log(c.ci_low)) / 2
    return math.ceil(n * (half / past) ** 2) if past > 0 and half > 0 else None


def _ratio(d: Decision) -> str:
    return _ratio_of(d.comparison)


def _ratio_of(c: Comparison | None) -> str:
    if c is None or c.ratio is None:
        return "-"
    ci = f" [{c.ci_low:.3f}, {c.ci_high:.3f}]" if c.ci_low is not None else ""
    return f"{c.ratio:.3f}{ci}"
