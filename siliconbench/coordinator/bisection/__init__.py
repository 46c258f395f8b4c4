"""Bisection: a regression searched to the llama.cpp commit that caused it, one state machine for both drivers.

- ``search``: the rules (what to measure next, what a step's processes mean, how a search ends), no I/O;
- ``record``: the search kept in the ``bisections`` table, a step's processes read back, a look's sweep, the
  record people read;
- ``sweeps``: a finding's series as a sweep, one look of a step.

Driven on this machine by ``siliconbench.embedded.bisect`` (``siliconbench regressions bisect``) and on the fleet by
``siliconbench.coordinator.watch.bisections`` (the scheduler's tick). May import ``stats``, ``history`` and ``fleet``.
"""
