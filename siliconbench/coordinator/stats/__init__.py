"""Statistics behind every verdict, on plain values, touching no database, no broker and no other room of
the coordinator: a fresh process is one sample and comparisons are of process medians (``significance``),
and the group-sequential design that stops a campaign early (``sequential``). May import: siliconbench,
numpy/scipy.
"""
