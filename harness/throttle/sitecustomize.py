"""Benchmark and test only: a real, proportional slowdown of the engines' timed calls.

Used by benchmarks/regression_power.py, benchmarks/suspect_hosts.py and tests/fleet/test_peers.py. Active only when
SILICONBENCH_THROTTLE is set, to a fraction f: every call the generate workload times (prefill, first_token,
decode) then busy-waits until it has taken (1 + f) times as long as it did, so tokens/s drop by exactly
1 - 1/(1 + f) (f = 1/0.95 - 1 = 0.0526 is a 5% slowdown), on top of whatever noise the machine adds. It runs
inside the job's child process, where `PYTHONPATH` puts this folder.

Without SILICONBENCH_THROTTLE_WHEN both engines (llama.cpp and MLX) are slowed. With
SILICONBENCH_THROTTLE_WHEN="mlx-lm==0.32.2" (or "llama-cpp-python==0.3.36") only that package's engine is, and
only when the child's installed version of it is that one (importlib.metadata): a release that "regressed".
"""

import os

from siliconbench.contract.engines import ENGINES

_f = float(os.environ.get("SILICONBENCH_THROTTLE") or 0)
_when = (os.environ.get("SILICONBENCH_THROTTLE_WHEN") or "").strip()
_ENGINES = {d.package: tuple(d.adapter.split(":")) for d in ENGINES.values()}


def _targets() -> list:
    """(module, class) pairs to slow: both engines, or the one whose package matches the condition."""
    if not _when:
        return list(_ENGINES.values())
    from importlib.metadata import PackageNotFoundError, version

    package, sep, wanted = _when.partition("==")
    package = package.strip().lower().replace("_", "-")
    if not sep or package not in _ENGINES:
        raise SystemExit(
            f"SILICONBENCH_THROTTLE_WHEN={_when!r}: expected PACKAGE==VERSION, PACKAGE one of {', '.join(_ENGINES)}"
        )
    try:
        installed = version(package)
    except PackageNotFoundError:
        return []
    return [_ENGINES[package]] if installed == wanted.strip() else []


if _f > 0:
    import functools
    import importlib
    import time

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

    for _module, _cls in _targets():
        _engine = getattr(importlib.import_module(_module), _cls)  # engines import their libraries lazily
        for _name in ("prefill", "first_token", "decode"):
            setattr(_engine, _name, _slowed(getattr(_engine, _name)))
