"""The coordinator: stores sweeps, jobs, results and hosts, and hands jobs to workers.

Storage lives in ``coordinator.models`` (tables), ``coordinator.database`` (engines, sessions, migrations),
``coordinator.store`` (reads and writes) and ``coordinator.export`` (the JSON/CSV export contract).
"""
