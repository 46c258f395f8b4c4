"""Compositions of the worker and the coordinator on one machine, without a broker: the embedded sweep run
(``run``, the default when no broker and no database are configured) a finding's interleaved rerun
(``confirm``), and a regression bisected to its llama.cpp commit (``bisect``, the driver of ``siliconbench.coordinator.bisection`` here). The CLI and the dashboard sit above them.
"""
