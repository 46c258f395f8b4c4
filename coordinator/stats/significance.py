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
- the p-value is a two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``: exact for small samples
  without ties, else the normal approximation with tie correction);
- the 95% confidence interval of the ratio is the distribution-free interval that belongs to both
  (Moses): the k-th smallest and k-th largest pairwise ratio, k from the U distribution's 2.5% quantile
  (normal approximation);
- the verdict is *regression* or *improvement* only when p < alpha **and** the ratio is at least the
  minimum effect away from 1, signed by the metric's direction in ``siliconbench.metrics``; *no change*
  otherwise; *insufficient data* when a side has too few processes for any p-value to reach alpha
  (4 a side is the least that can reach 0.05; ``COMPARE_PROCESSES``, the default of a version-comparing
  sweep and of ``confirm``, is what resolves 5% on a noisy machine).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import Enum
from statistics import NormalDist
from typing import Sequence

from siliconbench.aggregate import summarize
from siliconbench.metrics import get as get_metric

DEFAULT_ALPHA = 0.05
DEFAULT_MIN_EFFECT = 0.03
CI_LEVEL = 0.95


class Verdict(str, Enum):
    regression = "regression"
    improvement = "improvement"
    no_change = "no change"
    insufficient = "insufficient data"


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

    def as_dict(self) -> dict:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        return d


def min_p_value(n1: int, n2: int) -> float:
    """The smallest two-sided p-value an exact Mann-Whitney U test can give for these sample sizes."""
    return 2.0 / math.comb(n1 + n2, n1) if n1 and n2 else 1.0


def process_values(processes: Sequence[Sequence[float]]) -> list[float]:
    """One value per process: the median of its raw samples; processes without samples are left out."""
    return [s.median for p in processes if (s := summarize(list(p))) is not None]


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
    if ratio is None or p is None:
        return Verdict.insufficient
    if p >= alpha or abs(ratio - 1.0) < min_effect:
        return Verdict.no_change
    worse = ratio < 1.0 if better == "higher" else ratio > 1.0
    return Verdict.regression if worse else Verdict.improvement


def compare_processes(
    baseline: Sequence[Sequence[float]],
    candidate: Sequence[Sequence[float]],
    metric: str,
    *,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
) -> Comparison:
    """The statistics and verdict of one metric; each side is a list of processes, each its raw samples."""
    from scipy.stats import mannwhitneyu  # optional ([analysis] extra): only a comparison needs it

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
        Verdict.insufficient,
        None,
    )
    if not b or not c:
        return out
    if all(v > 0 for v in b + c):
        diffs = pairwise_log_ratios(b, c)
        mid = len(diffs) // 2
        hl = diffs[mid] if len(diffs) % 2 else (diffs[mid - 1] + diffs[mid]) / 2
        out.ratio = math.exp(hl)
        out.change_pct = (out.ratio - 1.0) * 100.0
        bounds = moses_interval(diffs, len(b), len(c))
        if bounds:
            out.ci_low, out.ci_high = math.exp(bounds[0]), math.exp(bounds[1])
    if min_p_value(len(b), len(c)) >= alpha:
        return out  # no p-value could reach alpha: not "no change", just not enough processes to say
    if len(set(b) | set(c)) == 1:
        out.p_value = 1.0
    else:
        out.p_value = float(mannwhitneyu(c, b, alternative="two-sided").pvalue)
    out.verdict = verdict(out.ratio, out.p_value, m.better, alpha, min_effect)
    return out
