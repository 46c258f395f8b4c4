"""Shared storage, below both the worker and the coordinator, one module per thing stored or system reached:
engines, sessions and migrations (``database``), the tables (``tables``, ``watch_tables``), sweeps and their
jobs (``sweep_store``), results and their samples, idempotent by job id (``result_store``), per-result
summaries (``summaries``), job state and claims (``jobstate``), the worker's hot path to PostgreSQL
(``hot_path``: the one place that talks to the driver below SQLAlchemy), database logins (``roles``),
raw-sample retention (``retention``), and the broker (``broker``: jobs sent by task name, the one module
that talks to Redis; ``outages``: loops that outlive the broker or the database). It imports only the contract.
"""
