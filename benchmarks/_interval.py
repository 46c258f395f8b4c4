"""The figure the in-process benchmarks print for a list of per-round values: its median and a 95 % t-interval of
its mean (decode_overhead.py, mlx_prompt_time.py)."""

from __future__ import annotations

import math
import statistics

from scipy import stats


def interval(xs: list[float]) -> tuple[float, float, float]:
    """(median, low, high): NaN bounds for fewer than two values."""
    med = statistics.median(xs)
    if len(xs) < 2:
        return med, math.nan, math.nan
    mean = statistics.fmean(xs)
    half = stats.t.ppf(0.975, len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
    return med, mean - half, mean + half
