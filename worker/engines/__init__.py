"""Engines behind one small interface (``base``), chosen by name from a registry: llama.cpp through
llama-cpp-python (``llama_cpp``, its CPU threadpool ``llama_threadpool``) and MLX through mlx-lm (``mlx_lm``), the
engine's last log lines (``engine_log``) and the C++ runtime loaded first (``native``). May import: platform.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version

from siliconbench.errors import UserError

from worker.engines.base import Engine

# Imported lazily: a Mac with only MLX must not need llama-cpp-python, and vice versa.
_REGISTRY = {
    "llama.cpp": ("worker.engines.llama_cpp", "LlamaCppEngine"),
    "mlx": ("worker.engines.mlx_lm", "MlxEngine"),
}


def engine_names() -> list[str]:
    return list(_REGISTRY)


def get_engine(name: str) -> Engine:
    """A fresh engine instance; raises UserError listing valid names for an unknown one."""
    if name not in _REGISTRY:
        raise UserError("engine", f"unknown engine {name!r}.", engine_names())

    module, cls = _REGISTRY[name]
    return getattr(importlib.import_module(module), cls)()


def installed_engines() -> dict[str, str]:
    """Engines importable on this host, name -> package version (for routing by capability)."""
    found = {}
    for name, dist in (("llama.cpp", "llama-cpp-python"), ("mlx", "mlx-lm")):
        try:
            found[name] = version(dist)
        except PackageNotFoundError:
            continue
    return found


__all__ = ["Engine", "get_engine", "engine_names", "installed_engines"]
