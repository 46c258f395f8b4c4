"""A CPU threadpool attached to a llama.cpp context, as llama-bench, llama-cli and llama-server attach one.

Without one, ggml's CPU backend makes a disposable threadpool for every graph it computes (ggml-cpu.c,
``ggml_graph_compute``): threads are started and joined on each decode step. llama-cpp-python attaches none,
and binds none of the calls, so they are bound here from the libraries it ships. The parameters are
llama-bench's defaults: ``ggml_threadpool_params_default(n_threads)``, ``--poll 50``, normal priority,
no strict CPU placement.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

GGML_MAX_N_THREADS = 512  # ggml.h
LLAMA_BENCH_POLL = 50


class ThreadpoolParams(ctypes.Structure):
    _fields_ = [
        ("cpumask", ctypes.c_bool * GGML_MAX_N_THREADS),
        ("n_threads", ctypes.c_int),
        ("prio", ctypes.c_int),
        ("poll", ctypes.c_uint32),
        ("strict_cpu", ctypes.c_bool),
        ("paused", ctypes.c_bool),
    ]


def _libs():
    import llama_cpp  # the engine: optional, imported by the job that runs it

    # The folder libllama was loaded from (the wheel's lib/, or LLAMA_CPP_LIB_PATH's build): a second copy of
    # ggml from elsewhere would give the context a thread pool of another library.
    lib_dir = Path(llama_cpp.llama_cpp._lib._name).parent
    ext = "dylib" if (lib_dir / "libggml-base.dylib").exists() else "so"
    base = ctypes.CDLL(str(lib_dir / f"libggml-base.{ext}"))
    cpu = ctypes.CDLL(str(lib_dir / f"libggml-cpu.{ext}"))
    base.ggml_threadpool_params_default.restype = ThreadpoolParams
    base.ggml_threadpool_params_default.argtypes = [ctypes.c_int]
    cpu.ggml_threadpool_new.restype = ctypes.c_void_p
    cpu.ggml_threadpool_new.argtypes = [ctypes.POINTER(ThreadpoolParams)]
    cpu.ggml_threadpool_free.argtypes = [ctypes.c_void_p]
    llama = llama_cpp.llama_cpp._lib
    llama.llama_attach_threadpool.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    llama.llama_detach_threadpool.argtypes = [ctypes.c_void_p]
    return base, cpu, llama


class Threadpools:
    """One pool for decode and one for batches (llama-bench: one pool, both roles), freed with ``close``."""

    def __init__(self, ctx, n_threads: int, n_threads_batch: int, poll: int = LLAMA_BENCH_POLL):
        self.base, self.cpu, self.llama = _libs()
        self.ctx = ctx
        self.pools = []
        for n in dict.fromkeys((n_threads, n_threads_batch)):  # the same count: one pool for both roles
            params = self.base.ggml_threadpool_params_default(n)
            params.poll = poll
            pool = self.cpu.ggml_threadpool_new(ctypes.byref(params))
            if not pool:
                raise RuntimeError(f"ggml_threadpool_new failed for {n} threads")
            self.pools.append(pool)
        batch = self.pools[-1]
        self.llama.llama_attach_threadpool(ctx, self.pools[0], batch if batch != self.pools[0] else None)

    def close(self) -> None:
        if self.pools:
            self.llama.llama_detach_threadpool(self.ctx)
            for pool in self.pools:
                self.cpu.ggml_threadpool_free(pool)
            self.pools = []
