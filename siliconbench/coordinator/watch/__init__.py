"""The regression watch: watches declared once and checked against their package index (``watches``,
``package_index``), the periodic tick fleet-wide (``scheduler``), the notifications outbox and its webhook
deliverer (``notify``) and the messages people read (``messages``). A new version becomes a campaign
(``campaigns/``); llama.cpp's tags are read by ``llama_tags``, and a confirmed regression between two of them
becomes a bisection (``bisections/``). ``stepping`` is what the two state machines share. May import: fleet, history, stats, siliconbench, storage.
"""
