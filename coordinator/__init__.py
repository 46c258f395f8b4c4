"""The coordinator proper: planning and placement of sweeps on the fleet, reconciliation, statistics, reports
and the dashboard's queries. It reads and writes through ``storage`` and never imports the worker or an engine.
"""
