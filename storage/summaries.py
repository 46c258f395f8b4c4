"""Per-result summaries: each metric's aggregate over a result's measured samples, kept beside the samples.

Computed once, when a result is stored (``store.save_result``, in the same statement or transaction), by
``siliconbench.aggregate.summarize`` over exactly the rows stored as samples (warmups excluded, non-finite
values never stored); the results row's one-value metrics (``RESULT_METRICS``) are summaries of one value.
The raw samples stay the source of truth: ``backfill`` rebuilds the summaries (and ``result_identities``)
of results stored before them (migration 0007).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import groupby

from sqlalchemy import insert, text
from sqlalchemy.engine import Connection

from siliconbench.aggregate import summarize

from .tables import ResultSummary

RESULT_METRICS = ("peak_memory_bytes", "load_s")  # one value per result, on the results row: what series show
FROM_RESULT = ("job_id", "identity_hash", "status", "throttled")  # columns a summary row copies from its result
COLUMNS = ("metric", "n", "mean", "median", "var", "min", "max")  # what summary_rows gives per metric
BATCH = 5_000  # summary rows per insert while backfilling


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
        out.append(dict(metric=metric, n=s.count, mean=s.mean, median=s.median, var=s.stddev ** 2, min=s.min,
                        max=s.max))
    return out


def backfill(conn: Connection) -> int:
    """Summaries of every result that has none yet, and each identity's first ok result; returns the number
    of summary rows written. Streams the samples in job order, so memory holds one batch, not the history."""
    q = text(f"SELECT r.job_id, r.identity_hash, r.status, r.throttled, {', '.join(RESULT_METRICS)}, s.metric, "
             "s.value FROM results r LEFT JOIN samples s ON s.job_id = r.job_id AND s.warmup = :f "
             "WHERE NOT EXISTS (SELECT 1 FROM result_summaries x WHERE x.job_id = r.job_id) "
             "ORDER BY r.job_id, s.id")
    # A second connection would not see this transaction's tables: stream on this one (server-side on PostgreSQL).
    if conn.dialect.name == "postgresql":  # plan the cursor for all its rows (a sort), not for the first ones
        conn.execute(text("SET LOCAL cursor_tuple_fraction = 1.0"))  # (random index reads: hours at 10M samples)
    rows = conn.execute(q, {"f": False}, execution_options={"stream_results": True, "yield_per": 20_000})
    batch, written = [], 0
    for _, group in groupby(rows, key=lambda r: r.job_id):
        group = list(group)
        first = group[0]
        samples = [{"warmup": False, "metric": r.metric, "value": r.value} for r in group if r.metric is not None]
        common = {k: first._mapping[k] for k in FROM_RESULT}
        batch += [common | row for row in summary_rows(samples, first._mapping)]
        if len(batch) >= BATCH:
            written += _write(conn, batch)
            batch = []
    written += _write(conn, batch) if batch else 0
    conn.execute(text("INSERT INTO result_identities (identity_hash, job_id) SELECT r.identity_hash, min(r.job_id) "
                      "FROM results r WHERE r.status = 'ok' AND NOT EXISTS (SELECT 1 FROM result_identities i "
                      "WHERE i.identity_hash = r.identity_hash) GROUP BY r.identity_hash"))
    return written


def _write(conn: Connection, batch: list[dict]) -> int:
    conn.execute(insert(ResultSummary.__table__), batch)
    return len(batch)
