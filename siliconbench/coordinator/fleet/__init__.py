"""The fleet as the coordinator sees it: hosts from their heartbeats, sweeps previewed, submitted, followed
and cancelled (``sweeps``), which host runs which job and why a job fits nowhere (``placement``), jobs put
back when their worker died (``reconcile``), SKU peers, their fleet verdict and stored suspects (``peers``),
and the test that finds a host whose series disagree with its peers' beyond their noise (``suspects``).
May import: stats, history, siliconbench, storage.
"""
