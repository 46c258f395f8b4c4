"""Engines behind one small interface (``base``), one adapter module each, chosen by name from the descriptions
in siliconbench/contract/engines.py: llama.cpp through llama-cpp-python (``llama_cpp``, its CPU threadpool
``llama_threadpool``) and MLX through mlx-lm (``mlx_lm``); the engine's last log lines (``engine_log``) and the C++
runtime loaded first (``native``). May import: platform.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version

from siliconbench.contract.engines import ENGINES
from siliconbench.contract.errors import UserError

from siliconbench.worker.engines.base import Engine


def engine_names() -> list[str]:
    return list(ENGINES)


def engine_class(name: str) -> type[Engine]:
    """The adapter class of engine ``name``, imported now: a Mac with only MLX must not need llama-cpp-python."""
    if name not in ENGINES:
        raise UserError("engine", f"unknown engine {name!r}.", engine_names())
    module, cls = ENGINES[name].adapter.split(":")
    return getattr(importlib.import_module(module), cls)


def get_engine(name: str) -> Engine:
    """A fresh engine instance; raises UserError listing valid names for an unknown one."""
    return engine_class(name)()


def installed_engines() -> dict[str, str]:
    """Engines importable on this host, name -> package version (for routing by capability)."""
    found = {}
    for name, desc in ENGINES.items():
        try:
            found[name] = version(desc.package)
        except PackageNotFoundError:
            continue
    return found


__all__ = ["Engine", "get_engine", "engine_class", "engine_names", "installed_engines"]
