"""The Streamlit dashboard: compare results, submit sweeps, watch the fleet (`siliconbench dashboard`).

The only package that imports Streamlit; it reads through ``siliconbench.coordinator.reads.queries`` and submits through
``siliconbench.coordinator.fleet.sweeps`` (with a broker) or ``siliconbench.embedded.run`` (without one).
"""
