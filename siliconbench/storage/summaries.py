"""Per-result summaries: each metric's aggregate over a result's measured samples, kept beside the samples.

Computed once, when a result is stored (``result_store.save_result``, in the same statement or transaction), by
``siliconbench.contract.aggregate.summarize`` over exactly the rows stored as samples (warmups excluded, non-finite
values never stored); the results row's one-value metrics (``RESULT_METRICS``) are summaries of one value.
The raw samples stay the source of truth: migration 0007 rebuilt the summaries (and ``result_identities``)
of results stored before them, with its own frozen copy of this arithmetic.
"""

from __future__ import annotations

from collections import defaultdict

from siliconbench.contract.aggregate import summarize

RESULT_METRICS = ("peak_memory_bytes", "load_s")  # one value per result, on the results row: what series show
FROM_RESULT = ("job_id", "identity_hash", "status", "disturbed")  # columns a summary row copies from its result
COLUMNS = ("metric", "n", "mean", "median", "var", "min", "max")  # what summary_rows gives per metric


def summary_rows(samples: list[dict], result_values: dict | None = None) -> list[dict]:
    """One row per metric (metric, n, mean, median, var, min, max) of sample rows (warmup, metric, value),
    and of the result's one-value metrics in ``result_values`` (None: not measured)."""
    measured: dict[str, list[float]] = defaultdict(list)
    for r in samples:
        if not r["warmup"]:
            measured[r["metric"]].append(r["value"])
    for metric in RESULT_METRICS:
        if (result_values or {}).get(metric) is not None:
            measured[metric] = [float(result_values[metric])]
    out = []
    for metric, values in measured.items():
        s = summarize(values)
        out.append(dict(metric=metric, n=s.count, mean=s.mean, median=s.median, var=s.stddev**2, min=s.min, max=s.max))
    return out
