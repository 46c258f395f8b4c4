"""Compositions of the worker and the coordinator on one machine, without a broker: the embedded sweep run
(``run``, the default when no broker and no database are configured) and a finding's interleaved rerun
(``confirm``). The CLI and the dashboard sit above them.
"""
