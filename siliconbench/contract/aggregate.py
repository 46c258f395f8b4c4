"""Aggregates of raw samples: the one place mean, median, stddev, min, max, percentiles and count are computed."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field

from .metrics import is_count

# pyperf flags a benchmark as unstable when its stddev exceeds 10% of the mean; so do we.
UNSTABLE_CV = 0.10
# MLPerf's early-stopping criterion: the fewest samples with which a tail percentile can be certified at all
# (its bound at 99 % confidence, no sample over it): 64 for p90, 662 for p99. A tail from fewer is shown, marked.
TAIL_SAMPLES = {90: 64, 99: 662}


def tail_certified(q: int, count: int) -> bool:
    """Whether ``count`` samples back the q-th percentile (TAIL_SAMPLES); any count backs the median."""
    return count >= TAIL_SAMPLES.get(q, 0)


@dataclass(frozen=True)
class Summary:
    mean: float
    median: float
    stddev: float
    min: float
    max: float
    count: int
    samples: list[float] = field(default_factory=list)
    p90: float = 0.0
    p99: float = 0.0
    total: float | None = None  # the sum, for count metrics only (failed requests over all restarts)

    @property
    def p50(self) -> float:
        return self.median

    @property
    def cv(self) -> float:
        return self.stddev / self.mean if self.mean else 0.0

    @property
    def unstable(self) -> bool:
        return self.count > 1 and self.cv > UNSTABLE_CV

    def as_dict(self) -> dict:
        return asdict(self)


def median_of(samples) -> float | None:
    """The median of raw samples (None where there are none): a process's one value in every comparison."""
    values = [float(v) for v in samples if v is not None]
    return statistics.median(values) if values else None


def summarize(samples: list[float], metric: str | None = None) -> Summary | None:
    """Summary of raw samples; None when there are none. stddev is the sample stddev (n-1). ``total`` (the sum) only
    where ``metric`` is a count (siliconbench.contract.metrics.Metric.kind): a sum of rates, shares or times means nothing."""
    values = [float(v) for v in samples if v is not None]
    if not values:
        return None
    mean = statistics.fmean(values)
    # Two passes in floats, correctly rounded sums: statistics.stdev's exact Fractions agree to ~1e-16 and took 60%
    # of the suspect-host check's time (siliconbench/coordinator/fleet/suspects.py summarizes every process of every series).
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return Summary(
        mean=mean,
        median=statistics.median(values),
        stddev=sd,
        min=min(values),
        max=max(values),
        count=len(values),
        samples=values,
        p90=percentile(values, 90),
        p99=percentile(values, 99),
        total=math.fsum(values) if metric is not None and is_count(metric) else None,
    )


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile with linear interpolation between closest ranks (numpy's default method)."""
    xs = sorted(values)
    if not xs:
        raise ValueError("percentile of no values")
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def stability_warnings(summaries: dict[str, Summary | None]) -> list[str]:
    """Human-readable warnings for metrics whose spread is too large to trust one number."""
    out = []
    for name, s in summaries.items():
        if s is not None and s.unstable:
            out.append(f"{name}: stddev is {s.cv:.0%} of the mean (over {UNSTABLE_CV:.0%})")
    return out
