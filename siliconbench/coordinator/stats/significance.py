"""The statistics behind every verdict (compare, regressions, confirm): a fresh process is one sample.

Repetitions inside one process share its memory layout, page-cache state and CPU placement, so they
agree with each other more than separate processes do. On this project's 2-core VM
(``benchmarks/regression_power.py``) the spread between processes was about twice the spread inside
one; a test on the pooled repetitions counts 5 correlated values as 5 independent ones, and the first
``compare`` built that way called 7-15% of A/A comparisons a regression. So each process contributes
one value, the median of its measured repetitions (or a reported aggregate where an import has no raw
samples), and on those per-process values:

- the ratio is the Hodges-Lehmann estimate: the median, over every (candidate process, baseline process)
  pair, of candidate / baseline (computed on logs; robust to one disturbed process);
- the p-value is a two-sided Mann-Whitney U test (``ranks.mann_whitney_p``, scipy's ``mannwhitneyu`` arithmetic:
  exact for small samples without ties, else the normal approximation with tie correction);
- the 95% confidence interval of the ratio is the distribution-free interval that belongs to both
  (Moses): the k-th smallest and k-th largest pairwise ratio, k from the U distribution's 2.5% quantile
  (normal approximation);
- the verdict is one of four (``Verdict``), never "no change" for "could not tell":

  - *regression* / *improvement*: p < alpha **and** the ratio at least the minimum effect away from 1, signed
    by the metric's direction in ``siliconbench.contract.metrics``;
  - *equivalent*: the ratio's 90% interval (Moses) inside (1 - min effect, 1 + min effect): the two one-sided
    tests at 0.05 a side (TOST). A significant change smaller than the minimum effect is equivalent too;
  - *inconclusive*: neither. The comparison says why (``reason``) and how many processes a side the observed
    effect and noise would need to resolve it (``needed_processes``: the interval narrows as 1/sqrt(n)); a side
    with too few processes for any p-value to reach alpha (4 a side is the least that reaches 0.05) is
    inconclusive for that reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from statistics import NormalDist

from siliconbench.contract.aggregate import median_of, summarize
from siliconbench.contract.metrics import get as get_metric

from .ranks import mann_whitney_p

DEFAULT_ALPHA = 0.05
DEFAULT_MIN_EFFECT = 0.03
CI_LEVEL = 0.95
EQUIVALENCE_LEVEL = 0.90  # TOST at 0.05 a side: the interval an *equivalent* verdict puts inside the margin
MAX_NEEDED = 10_000  # processes a side beyond which "needed" is only "more than this"


class Verdict(StrEnum):
    """The four answers a comparison can give; nothing else is printed as a verdict."""

    regression = "regression"
    improvement = "improvement"
    equivalent = "equivalent"
    inconclusive = "inconclusive"


CHANGES = (Verdict.regression, Verdict.improvement)


@dataclass
class Comparison:
    metric: str
    unit: str
    better: str
    n_baseline: int  # processes: the independent samples of the test
    n_candidate: int
    samples_baseline: int  # raw repetitions behind them
    samples_candidate: int
    baseline_median: float | None  # median of the per-process medians
    candidate_median: float | None
    ratio: float | None  # Hodges-Lehmann estimate of candidate / baseline
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: Verdict
    change_pct: float | None  # (ratio - 1) x 100, raw: its sign is not "good" or "bad" by itself
    eq_low: float | None = None  # the ratio's EQUIVALENCE_LEVEL interval: what *equivalent* puts inside the margin
    eq_high: float | None = None
    min_effect: float = DEFAULT_MIN_EFFECT
    reason: str = ""  # why this verdict, in a sentence: an inconclusive one says what would resolve it
    needed_processes: int | None = None  # inconclusive: processes a side the observed effect and noise would need

    def as_dict(self) -> dict:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        return d


def min_p_value(n1: int, n2: int) -> float:
    """The smallest two-sided p-value an exact Mann-Whitney U test can give for these sample sizes."""
    return 2.0 / math.comb(n1 + n2, n1) if n1 and n2 else 1.0


def process_values(processes: Sequence[Sequence[float]]) -> list[float]:
    """One value per process: the median of its raw samples; processes without samples are left out."""
    return [m for p in processes if (m := median_of(p)) is not None]


def pairwise_log_ratios(baseline: Sequence[float], candidate: Sequence[float]) -> list[float]:
    """log(c / b) for every (candidate, baseline) pair, sorted."""
    return sorted(math.log(c) - math.log(b) for c in candidate for b in baseline)


def moses_interval(diffs: list[float], n1: int, n2: int, level: float = CI_LEVEL) -> tuple[float, float] | None:
    """The distribution-free interval of the Hodges-Lehmann shift, from the sorted pairwise differences."""
    z = NormalDist().inv_cdf(0.5 + level / 2)
    # Hollander & Wolfe: the C-th smallest and C-th largest difference (1-based), C from the U distribution.
    c = math.floor(n1 * n2 / 2 - z * math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12))
    if c < 1:
        return None
    return diffs[c - 1], diffs[-c]


def verdict(ratio: float | None, p: float | None, better: str, alpha: float, min_effect: float) -> Verdict:
    """Regression or improvement (significant and beyond the minimum effect), else inconclusive: the caller that
    has the equivalence interval turns an inconclusive into *equivalent* (``classify``)."""
    if ratio is None or p is None or p >= alpha or abs(ratio - 1.0) < min_effect:
        return Verdict.inconclusive
    worse = ratio < 1.0 if better == "higher" else ratio > 1.0
    return Verdict.regression if worse else Verdict.improvement


def inside_margin(low: float | None, high: float | None, min_effect: float) -> bool:
    """An interval of the ratio inside (1 - min effect, 1 + min effect): the equivalence of TOST."""
    return low is not None and high is not None and 1.0 - min_effect < low and high < 1.0 + min_effect


def needed_processes(c: Comparison, min_effect: float) -> int | None:
    """Processes a side that would resolve an inconclusive comparison if the observed effect and noise held: the
    95% interval (log scale) narrows as 1/sqrt(n), so a change needs it clear of 1, an equivalence needs the 90%
    one inside the margin. None where nothing measured tells (no interval)."""
    n = min(c.n_baseline, c.n_candidate)
    if c.ratio is None or c.ci_low is None or c.ci_high is None or n < 1:
        return None
    d = abs(math.log(c.ratio))
    half = (math.log(c.ci_high) - math.log(c.ci_low)) / 2
    if half <= 0:
        return None
    margin = min(math.log(1.0 + min_effect), -math.log(1.0 - min_effect))
    z95, z90 = NormalDist().inv_cdf(0.975), NormalDist().inv_cdf(0.95)
    options = []
    if d >= math.log(1.0 + min_effect) * 0.999:  # a change as large as the margin: needs significance
        options.append(n * (half / d) ** 2)
    if d < margin:  # an effect inside the margin: needs the 90% interval inside it
        options.append(n * (half * z90 / z95 / (margin - d)) ** 2)
    if not options:
        return None
    return min(MAX_NEEDED, max(n + 1, math.ceil(min(options))))


def classify(c: Comparison, alpha: float, min_effect: float) -> Comparison:
    """Set ``c``'s verdict to one of the four, with its reason (the module docstring's rules)."""
    c.min_effect = min_effect
    if c.verdict in CHANGES:
        c.reason = f"p {c.p_value:.2g} < {alpha:g} and the ratio {c.ratio:.3f} is {min_effect:.0%} or more from 1"
        return c
    if inside_margin(c.eq_low, c.eq_high, min_effect):
        c.verdict = Verdict.equivalent
        c.reason = f"the {EQUIVALENCE_LEVEL:.0%} interval [{c.eq_low:.3f}, {c.eq_high:.3f}] is inside ±{min_effect:.0%}"
        return c
    c.verdict = Verdict.inconclusive
    c.needed_processes = needed_processes(c, min_effect)
    if c.ratio is None:
        c.reason = "no comparable values on one side"
    elif c.p_value is None:
        c.reason = f"{min(c.n_baseline, c.n_candidate)} process(es) a side cannot reach p < {alpha:g}"
    else:
        lo = f"{c.eq_low:.3f}" if c.eq_low is not None else "?"
        hi = f"{c.eq_high:.3f}" if c.eq_high is not None else "?"
        c.reason = (
            f"neither a change (p {c.p_value:.2g}, ratio {c.ratio:.3f}) nor equivalent "
            f"({EQUIVALENCE_LEVEL:.0%} interval [{lo}, {hi}] not inside ±{min_effect:.0%})"
        )
    if c.needed_processes is not None:
        more = "more than " if c.needed_processes >= MAX_NEEDED else "about "
        c.reason += f"; {more}{c.needed_processes} processes a side would resolve it at this effect and noise"
    return c


def compare_processes(
    baseline: Sequence[Sequence[float]],
    candidate: Sequence[Sequence[float]],
    metric: str,
    *,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
) -> Comparison:
    """The statistics and verdict of one metric; each side is a list of processes, each its raw samples."""
    m = get_metric(metric)
    b, c = process_values(baseline), process_values(candidate)
    out = Comparison(
        metric,
        m.unit,
        m.better,
        len(b),
        len(c),
        sum(len(p) for p in baseline),
        sum(len(p) for p in candidate),
        summarize(b).median if b else None,
        summarize(c).median if c else None,
        None,
        None,
        None,
        None,
        Verdict.inconclusive,
        None,
    )
    if not b or not c:
        return classify(out, alpha, min_effect)
    if all(v > 0 for v in b + c):
        diffs = pairwise_log_ratios(b, c)
        mid = len(diffs) // 2
        hl = diffs[mid] if len(diffs) % 2 else (diffs[mid - 1] + diffs[mid]) / 2
        out.ratio = math.exp(hl)
        out.change_pct = (out.ratio - 1.0) * 100.0
        bounds = moses_interval(diffs, len(b), len(c))
        if bounds:
            out.ci_low, out.ci_high = math.exp(bounds[0]), math.exp(bounds[1])
        eq = moses_interval(diffs, len(b), len(c), level=EQUIVALENCE_LEVEL)
        if eq:
            out.eq_low, out.eq_high = math.exp(eq[0]), math.exp(eq[1])
    if min_p_value(len(b), len(c)) >= alpha:
        out.eq_low = out.eq_high = None  # no p-value could reach alpha: too few processes to say either way
        return classify(out, alpha, min_effect)
    if len(set(b) | set(c)) == 1:
        out.p_value = 1.0
    else:
        out.p_value = mann_whitney_p(c, b)
    out.verdict = verdict(out.ratio, out.p_value, m.better, alpha, min_effect)
    return classify(out, alpha, min_effect)
