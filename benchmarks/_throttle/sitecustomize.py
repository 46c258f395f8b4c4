"""Benchmark-only (benchmarks/regression_power.py): a real, proportional slowdown of llama.cpp's timed calls.

Active only when SILICONBENCH_THROTTLE is set, to a fraction f: every call the generate workload times
(prefill, first_token, decode) then busy-waits until it has taken (1 + f) times as long as it did, so
tokens/s drop by exactly 1 - 1/(1 + f) (f = 1/0.95 - 1 = 0.0526 is a 5% slowdown), on top of whatever
noise the machine adds. It runs inside the job's child process, where `PYTHONPATH` puts this folder.
"""

import os

_f = float(os.environ.get("SILICONBENCH_THROTTLE") or 0)
if _f > 0:
    import functools
    import time

    from worker.engines.llama_cpp import LlamaCppEngine

    def _slowed(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            until = t0 + (time.perf_counter() - t0) * (1.0 + _f)
            while time.perf_counter() < until:  # busy, like compute: a sleep would yield the core
                pass
            return out

        return wrapped

    for _name in ("prefill", "first_token", "decode"):
        setattr(LlamaCppEngine, _name, _slowed(getattr(LlamaCppEngine, _name)))
