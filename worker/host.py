"""The platform seam's CPU facts: how many threads an engine should use, decided the way llama.cpp decides.

llama-bench's default thread count is ``common_cpu_get_num_math()``, which on macOS and Linux is
``common_cpu_get_num_physical_cores()``: ``hw.perflevel0.physicalcpu`` (the performance cores) on a Mac,
falling back to ``hw.physicalcpu``; on Linux the number of distinct ``thread_siblings`` sets, i.e. physical
cores. siliconbench uses the same count for decode and batch threads, for both engines' CPU work.
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import lru_cache


def _sysctl_int(name: str) -> int | None:
    try:
        out = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5).stdout.strip()
        return int(out) if out else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def _linux_physical_cores() -> int | None:
    siblings = set()
    cpu = 0
    while True:
        path = f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings"
        try:
            with open(path) as f:
                siblings.add(f.read().strip())
        except OSError:
            break
        cpu += 1
    return len(siblings) or None


@lru_cache(maxsize=1)
def performance_cores() -> int:
    """Physical performance cores: llama-bench's default ``-t`` on this host."""
    if sys.platform == "darwin":
        n = _sysctl_int("hw.perflevel0.physicalcpu") or _sysctl_int("hw.physicalcpu")
    else:
        n = _linux_physical_cores()
    return n or os.cpu_count() or 1
