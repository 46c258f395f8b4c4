"""Real processes and real tools for the tests and the benchmarks, in the one place both may import: Redis
servers, worker and CLI processes, cuttable TCP proxies (``fleet``); llama-bench and mlx_lm.benchmark runs
(``tools``); llama-perplexity and its KL-divergence beside ours (``perplexity_tools``, ``kld_tools``); the
fault campaign's schedule (``fault_schedule``); the throttled-worker scenario (``peer_scenario``, with
``throttle/``'s sitecustomize). It may import the project's packages; ``tests/`` and ``benchmarks/`` import it and
never each other (tests/house/test_import_rules.py).
"""
