"""The Streamlit dashboard: compare results, submit sweeps, watch the fleet (`siliconbench dashboard`).

The only package that imports Streamlit; it reads through ``coordinator.reads.queries`` and submits through
``coordinator.fleet.sweeps`` (with a broker) or ``embedded.run`` (without one).
"""
