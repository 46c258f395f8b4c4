"""Per-result summaries: each metric's aggregate over a result's measured samples, kept beside the samples.

Computed once, when a result is stored (``store.save_result``, in the same statement or transaction), by
``siliconbench.aggregate.summarize`` over exactly the rows stored as samples (warmups excluded, non-finite
values never stored). The raw samples stay the source of truth: ``backfill`` rebuilds the summaries of
results that have samples but no summaries (migration 0007 runs it for results stored before it).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import groupby

from sqlalchemy import insert, text
from sqlalchemy.engine import Connection

from siliconbench.aggregate import summarize

from .tables import ResultSummary

BATCH = 5_000  # summary rows per insert while backfilling


def summary_rows(samples: list[dict]) -> list[dict]:
    """One row per metric (metric, n, mean, median, var, min, max) of sample rows (warmup, metric, value)."""
    measured: dict[str, list[float]] = defaultdict(list)
    for r in samples:
        if not r["warmup"]:
            measured[r["metric"]].append(r["value"])
    out = []
    for metric, values in measured.items():
        s = summarize(values)
        out.append(dict(metric=metric, n=s.count, mean=s.mean, median=s.median, var=s.stddev ** 2, min=s.min,
                        max=s.max))
    return out


def backfill(conn: Connection) -> int:
    """Summaries for every result with measured samples and no summary yet; returns how many rows it wrote.

    Streams the samples in (job, metric) order, so memory holds one batch of summaries, not the history.
    """
    q = text("SELECT s.job_id, s.metric, s.value FROM samples s WHERE s.warmup = :f AND NOT EXISTS "
             "(SELECT 1 FROM result_summaries r WHERE r.job_id = s.job_id) ORDER BY s.job_id, s.metric, s.id")
    # A second connection would not see this transaction's table: stream on this one (server-side on PostgreSQL).
    rows = conn.execute(q, {"f": False}, execution_options={"stream_results": True, "yield_per": 20_000})
    batch, written = [], 0
    for (job_id, metric), group in groupby(rows, key=lambda r: (r[0], r[1])):
        values = [r[2] for r in group]
        batch += [dict(job_id=job_id, **row) for row in summary_rows(
            [{"warmup": False, "metric": metric, "value": v} for v in values])]
        if len(batch) >= BATCH:
            written += _write(conn, batch)
            batch = []
    return written + (_write(conn, batch) if batch else 0)


def _write(conn: Connection, batch: list[dict]) -> int:
    conn.execute(insert(ResultSummary.__table__), batch)
    return len(batch)
