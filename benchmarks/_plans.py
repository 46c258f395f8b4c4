"""Query plans of what a dashboard query runs: every SELECT it sends, explained with EXPLAIN (ANALYZE, BUFFERS).

``capture`` records the statements (and their parameters) one call sends through the engine; ``explain``
runs each again under EXPLAIN and ``summary`` says in one line what the plan does: the top node, the
indexes it reads, any sequential scan (the thing that grows with history), buffers and time.
"""

from __future__ import annotations

import json
from contextlib import contextmanager

from sqlalchemy import event
from sqlalchemy.orm import Session


@contextmanager
def capture(session: Session):
    """Collect (statement, parameters) of every SELECT sent while the block runs."""
    engine, sent = session.get_bind(), []

    def record(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith(("SELECT", "WITH")) and not executemany:
            sent.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


def explain(session: Session, statement: str, parameters) -> dict:
    sql = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement
    raw = session.connection().exec_driver_sql(sql, parameters or {}).scalar()
    return (json.loads(raw) if isinstance(raw, str) else raw)[0]


def _nodes(node: dict):
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def summary(plan: dict) -> str:
    top = plan["Plan"]
    nodes = list(_nodes(top))
    indexes = sorted({n["Index Name"] for n in nodes if "Index Name" in n})
    seq = sorted(
        {
            f"{n['Relation Name']} ({n.get('Actual Rows', 0) * n.get('Actual Loops', 1):,} rows)"
            for n in nodes
            if n["Node Type"] == "Seq Scan"
        }
    )
    buffers = top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0)
    return (
        f"{top['Node Type']}, {plan['Execution Time']:.1f} ms, {buffers:,} buffers; "
        f"indexes: {', '.join(indexes) or 'none'}; seq scans: {', '.join(seq) or 'none'}"
    )
