"""A bisection's rules, one place for both ways of running one: on this machine (``embedded.bisect``) and on the
fleet, driven by the watch's scheduler (``coordinator.watch.bisections``).

- **The ends**: the good end against the bad end, decided by ``sequential.decide`` (the watch's confirm
  statistics: a fresh process per sample, Mann-Whitney U with the Hodges-Lehmann ratio, group-sequential looks,
  the minimum effect). Only a regression starts the search.
- **A midpoint** is measured between both current ends, all three interleaved. It is *bad* when it is a
  regression against the good end; *good* when the bad end is a regression against it, or when it is equivalent
  to the good end (decided no change before the last look: its interval inside the minimum effect). Anything
  else at a look needs the next look; still nothing at the last look is *undecided*: the search stops and says
  so, it never guesses.
- **The next midpoint**: the middle of the commits still in question (those not skipped), strictly between the
  current ends.
"""

from __future__ import annotations

from typing import Sequence

from .sequential import LOOKS, Decision, decide
from .significance import Verdict

BAD, GOOD = "bad", "good"


def ends_decision(good, bad, metric: str, *, min_effect: float, looks: Sequence[int] = LOOKS) -> Decision:
    return decide(good, bad, metric, min_effect=min_effect, looks=looks)


def midpoint_decisions(
    lo, mid, hi, metric: str, *, min_effect: float, looks: Sequence[int] = LOOKS
) -> tuple[Decision, Decision]:
    """(good end -> midpoint, midpoint -> bad end)."""
    return (
        decide(lo, mid, metric, min_effect=min_effect, looks=looks),
        decide(mid, hi, metric, min_effect=min_effect, looks=looks),
    )


def midpoint_verdict(d1: Decision, d2: Decision, looks: Sequence[int] = LOOKS) -> str | None:
    """BAD, GOOD, or None (not yet: run the next look) from ``midpoint_decisions``."""
    if d1.verdict == Verdict.regression:
        return BAD
    if d2.verdict == Verdict.regression or (d1.decided and d1.verdict == Verdict.no_change and d1.look < len(looks)):
        return GOOD
    return None


def comparison_dict(d: Decision) -> dict | None:
    """A step's evidence as it is kept: the decision's comparison (ratio, interval, p, sizes), if it got one."""
    return d.comparison.as_dict() if d.comparison else None


def next_midpoint(candidates: Sequence[int], lo: int, hi: int) -> int | None:
    """The index to measure next among ``candidates`` (indices into the commits, the good end being -1), or
    None when no commit is left strictly between the ends: ``hi`` is then the first bad commit."""
    inside = [i for i in candidates if lo < i < hi]
    return inside[len(inside) // 2] if inside else None
