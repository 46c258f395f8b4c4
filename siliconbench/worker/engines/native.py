"""The C++ runtime, loaded into the process's global symbol scope before any engine library.

llama-cpp-python loads libggml with RTLD_GLOBAL before libllama (llama_cpp/_ggml.py). A CUDA build's libggml
needs libggml-cuda before libstdc++, and libggml-cuda exports its own copies of libstdc++ template instances
(std::ostream::_M_insert<long>, std::codecvt facets): the dynamic linker then binds libllama's iostream calls
to those copies, and the first stringstream llama.cpp formats while loading a model (print_info's per-layer
lists) crashes with SIGSEGV. cuda-gdb on the lent H200 showed exactly that frame
(docs/evidence/gpu-2026-12-04/backtrace.txt). With the system libstdc++ already global, every library binds to
it. llama-bench never crashed because an executable links libstdc++ ahead of its libraries. Linux only: macOS
resolves symbols per library (two-level namespaces).
"""

from __future__ import annotations

import ctypes
import sys

_loaded = False


def preload_cxx_runtime() -> None:
    global _loaded
    if _loaded or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        pass  # no libstdc++: then no C++ engine library can load either, and says so itself
    _loaded = True
