"""Which BLAS an MLX child uses on Linux, chosen before the process starts (it cannot change after).

mlx's Linux CPU wheel bundles a reference BLAS: a 512x1024x2816 float32 matmul takes ~750 ms against
~23 ms with Debian's OpenBLAS preloaded (measured on the project's VM). The choice is recorded with the result.
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from siliconbench.worker import platform
from siliconbench.worker.platform.threads import performance_cores

OPENBLAS_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libblas.so.3",
)


def find_openblas() -> str | None:
    for p in OPENBLAS_CANDIDATES:
        if Path(p).exists():
            return p
    return None


def mlx_on_cuda() -> bool:
    """MLX's CUDA backend is installed (the mlx-cuda-12 / mlx-cuda-13 wheel that `mlx[cuda13]` brings)."""
    for dist in ("mlx-cuda-13", "mlx-cuda-12", "mlx-cuda"):
        try:
            version(dist)
            return True
        except PackageNotFoundError:
            continue
    return False


def inherited_preload() -> str:
    """This process's LD_PRELOAD less any BLAS: which BLAS a child uses is child_blas_env's choice alone, never
    inherited (a worker started with OpenBLAS preloaded gave a `blas: bundled` child OpenBLAS, recorded as bundled)."""
    return " ".join(p for p in os.environ.get("LD_PRELOAD", "").split() if "blas" not in Path(p).name.lower())


def child_blas_env(mode: str, threads: int | None) -> dict[str, str]:
    """Environment for an MLX child: LD_PRELOAD of OpenBLAS for 'auto'/'openblas' where it exists; none where
    MLX runs on a CUDA GPU (the preload is for MLX's CPU build, whose matmuls it serves)."""
    if platform.current().name == "Darwin":
        return {"SILICONBENCH_MLX_BLAS": "Accelerate"}
    if mlx_on_cuda() and mode == "auto":
        return {"SILICONBENCH_MLX_BLAS": "none (CUDA device)"}
    env: dict[str, str] = {"LD_PRELOAD": inherited_preload()}
    lib = find_openblas() if mode in ("auto", "openblas") else None
    if mode == "openblas" and lib is None:
        raise FileNotFoundError(
            "engine_options.mlx.blas=openblas but no OpenBLAS is installed "
            "(Debian: apt-get install libopenblas0-pthread)"
        )
    if lib:
        env["LD_PRELOAD"] = " ".join(p for p in (lib, env["LD_PRELOAD"]) if p)
        env["SILICONBENCH_MLX_BLAS"] = f"openblas ({lib})"
        # The same count llama.cpp gets: the sweep's threads, else the physical performance cores.
        env["OPENBLAS_NUM_THREADS"] = str(threads or performance_cores())
    else:
        env["SILICONBENCH_MLX_BLAS"] = "bundled reference BLAS"
    return env
