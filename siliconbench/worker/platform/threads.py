"""How many threads an engine should use, decided the way llama.cpp decides: a thin wrapper over the
platform seam (siliconbench.worker.platform), kept because the engines and BLAS set-up import it by this name.

llama-bench's default thread count is ``common_cpu_get_num_math()``, which on macOS and Linux is
``common_cpu_get_num_physical_cores()``: the performance cores on a Mac, the physical cores on Linux.
siliconbench uses the same count for decode and batch threads, for both engines' CPU work.
"""

from __future__ import annotations

import os
from functools import lru_cache

from siliconbench.worker.platform import current

# ggml's CPU threads meet at a barrier after every operation. In a build with OpenMP (llama.cpp's Linux builds and
# the llama-cpp-python wheel link libgomp) that barrier is OpenMP's, and these variables choose whether a waiting
# thread spins or sleeps: on a loaded machine a 10x difference in CPU time, and a different speed (docs/measurement.md).
OPENMP_WAIT = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


@lru_cache(maxsize=1)
def performance_cores() -> int:
    """Physical performance cores: llama-bench's default ``-t`` on this host."""
    return current().performance_cores()


def openmp_wait() -> dict[str, str]:
    """The OpenMP wait variables set in this process (and so in the engine it runs): recorded with llama.cpp's
    effective options, so results measured with and without them are never pooled."""
    return {name: os.environ[name] for name in OPENMP_WAIT if os.environ.get(name)}
