"""How many threads an engine should use, decided the way llama.cpp decides: a thin wrapper over the
platform seam (siliconbench.worker.platform), kept because the engines and BLAS set-up import it by this name.

llama-bench's default thread count is ``common_cpu_get_num_math()``, which on macOS and Linux is
``common_cpu_get_num_physical_cores()``: the performance cores on a Mac, the physical cores on Linux.
siliconbench uses the same count for decode and batch threads, for both engines' CPU work.
"""

from __future__ import annotations

from functools import lru_cache

from siliconbench.worker.platform import current


@lru_cache(maxsize=1)
def performance_cores() -> int:
    """Physical performance cores: llama-bench's default ``-t`` on this host."""
    return current().performance_cores()
