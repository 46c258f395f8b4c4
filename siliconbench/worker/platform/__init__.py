"""The operating-system seam: one module per platform, chosen once, behind one small interface.

Everything that differs by OS goes through ``current()``: host facts, the performance-core count,
thermal state and power, and (on Darwin) a process's phys_footprint. Nothing else in the tree tests
``sys.platform`` for these facts (psutil's ``_psosx.py`` / ``_pslinux.py`` behind one API is the model).

Common to every platform:

- ``name``: "Darwin" or "Linux".
- ``host_facts() -> dict``: the keys ``siliconbench.contract.results.Environment`` takes (hostname, os,
  os_version, chip, cores, memory_bytes, machine, python) plus ``host_details``, a dict of the
  platform's own identity facts (on a Mac: hw.model, P/E cores, GPU cores, Metal, wired limit,
  macOS build, Rosetta).
- ``performance_cores() -> int``: llama-bench's default thread count on this host.
- ``thermal_power() -> dict``: ``thermal_state`` ("nominal" / "throttled" / "unknown"),
  ``power_source`` ("ac" / "battery" / "ups" / "unknown"), ``low_power_mode`` (True / False / None
  when the OS does not say), plus the raw figures they were read from.
- ``phys_footprint(pid)`` / ``lifetime_max_phys_footprint(pid)``: the bytes macOS charges a process (Metal
  allocations in unified memory included), now and at its peak; None on Linux, where RSS is the figure.
- ``own_peak_rss_bytes()``; ``reset_peak_rss(pid)`` / ``peak_rss(pid)`` (Linux's VmHWM, reset through
  clear_refs) and ``pss(pid)``: False / None on Darwin, which has phys_footprint instead.
- ``can_evict`` / ``evict_file(path)``: drop a file's clean pages from the page cache, unprivileged
  (Linux: posix_fadvise DONTNEED; Darwin: msync MS_INVALIDATE on a shared mapping).
"""

from __future__ import annotations

import sys
from functools import lru_cache
from typing import Protocol

from siliconbench.contract.settings import data_dir

from siliconbench.worker.platform.darwin import Darwin
from siliconbench.worker.platform.linux import Linux


class Platform(Protocol):
    name: str

    def host_facts(self) -> dict: ...

    def performance_cores(self) -> int: ...

    def thermal_power(self) -> dict: ...

    def memory_pressure_pct(self) -> float | None: ...

    can_evict: bool

    def evict_file(self, path) -> None: ...

    def phys_footprint(self, pid: int) -> int | None: ...

    def own_peak_rss_bytes(self) -> int: ...

    def reset_peak_rss(self, pid: int) -> bool: ...

    def peak_rss(self, pid: int) -> int | None: ...

    def pss(self, pid: int) -> int | None: ...

    def lifetime_max_phys_footprint(self, pid: int) -> int | None: ...


class UnsupportedPlatform(RuntimeError):
    """siliconbench measures on macOS and Linux only."""


@lru_cache(maxsize=1)
def current() -> Platform:
    """This OS's platform object, chosen once per process."""
    if sys.platform == "darwin":
        return Darwin(gpu_cache=data_dir() / "gpu_facts.json")
    if sys.platform.startswith("linux"):
        return Linux()
    raise UnsupportedPlatform(f"no platform module for {sys.platform!r}: siliconbench runs on Darwin and Linux")


def report() -> dict:
    """Thermal state and power as the worker sees them now, for ``siliconbench doctor`` to print as
    ``key=value``: flat scalars, read fresh (host facts are ``host_facts()``, printed on their own)."""
    p = current()
    state = p.thermal_power()
    zones = state.pop("thermal_zones", None)
    flat = {k: v for k, v in state.items() if v is None or isinstance(v, (str, int, float, bool))}
    if zones is not None:
        flat["thermal_zones"] = len(zones)
    return {"platform": p.name, "performance_cores": p.performance_cores(), **flat}
