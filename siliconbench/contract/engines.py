"""The engines: one description each, the one place every room reads an engine's facts from.

A sweep, a result and a worker name an engine by ``name``. Everything else that differs between engines — the
package whose version is "the engine's version", the modules a job imports, the artifact format it loads, where
its options live in a sweep, the worker's adapter class, its OpenAI-compatible server, the tool its numbers are
held against — is a field here. Adding an engine is one entry in ``ENGINES`` (and its adapter in siliconbench/worker/engines/).

The contract imports nothing of the project, so the adapter and the server are named by module path, not imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

# The names a sweep may use. A Literal so pydantic validates them and lists the choices in an error; the
# assertion below keeps it equal to the descriptions.
EngineName = Literal["llama.cpp", "mlx"]


@dataclass(frozen=True)
class EngineDescription:
    name: str
    package: str  # the distribution whose version is "the engine's version" (env add, watch, compare, results)
    pinned: tuple[str, ...]  # the distributions an engine environment pins, the engine package first
    modules: tuple[str, ...]  # imported before a job's memory baseline; the first one importable = installed
    format: str  # the artifact format it loads (siliconbench.contract.manifest: gguf | mlx)
    options: str  # the EngineOptions field (spec.py) that holds its sweep options
    adapter: str  # "module:Class" of its siliconbench.worker.engines.base.Engine
    version_source: Literal["release", "build"]  # a package release on the index, or a build of a source tree
    backend: str  # how the backend it ran on is found (recorded as Environment.backend)
    # Its OpenAI-compatible HTTP servers (siliconbench/worker/serving/servers.py SERVERS), the default first; a server workload's
    # `server` setting picks another. `unnamed_server` is the one jobs ran before the choice existed: named in no job,
    # so those jobs keep their ids and their history.
    servers: tuple[str, ...]
    unnamed_server: str
    yardstick: str  # the engine's own tool our figures are held to (benchmarks/fidelity.py)
    order_by: tuple[str, ...]  # the result components a history orders its versions by, first decides
    takes_mmap: bool  # whether its loader has an mmap on/off switch (the swap workload's `mmap` axis)
    preloads_blas: (
        bool  # the Linux CPU build computes through a BLAS the job's child preloads (siliconbench/worker/envs/blas.py)
    )
    built_from_source: bool  # a version may also be a build of any commit of its source (siliconbench/worker/builds)
    extra: str  # the pip extra of pyproject.toml that installs it


ENGINES: dict[str, EngineDescription] = {
    d.name: d
    for d in (
        EngineDescription(
            name="llama.cpp",
            package="llama-cpp-python",
            pinned=("llama-cpp-python",),
            modules=("llama_cpp",),
            format="gguf",
            options="llama_cpp",
            adapter="siliconbench.worker.engines.llama_cpp:LlamaCppEngine",
            version_source="release",
            backend="the ggml backend devices the library registers (llama_supports_gpu_offload, the device list): "
            "Metal, CUDA or CPU",
            servers=("llama-server", "llama_cpp.server"),
            unnamed_server="llama_cpp.server",
            yardstick="llama-bench (and llama-perplexity) of the same llama.cpp tree",
            order_by=("build", "llama-cpp-python"),
            takes_mmap=True,
            preloads_blas=False,
            built_from_source=True,
            extra="llamacpp",
        ),
        EngineDescription(
            name="mlx",
            package="mlx-lm",
            pinned=("mlx-lm", "mlx"),
            modules=("mlx.core", "mlx_lm"),
            format="mlx",
            options="mlx",
            adapter="siliconbench.worker.engines.mlx_lm:MlxEngine",
            version_source="release",
            backend="mx.default_device() and the Metal / CUDA availability mlx reports",
            servers=("mlx_lm.server",),
            unnamed_server="mlx_lm.server",
            yardstick="mlx_lm.benchmark (and mlx_lm.perplexity) of the same mlx-lm",
            order_by=("mlx-lm", "mlx"),
            takes_mmap=False,
            preloads_blas=True,
            built_from_source=False,
            extra="mlx",
        ),
    )
}
assert set(get_args(EngineName)) == set(ENGINES), "EngineName must list exactly the described engines"

ENGINE_NAMES: tuple[str, ...] = tuple(ENGINES)
ENGINE_PACKAGE: dict[str, str] = {e.name: e.package for e in ENGINES.values()}
# Which engine a package moves: mlx-lm and the mlx core both change what the MLX engine measures.
PACKAGE_ENGINE: dict[str, str] = {p: e.name for e in ENGINES.values() for p in e.pinned}
# The result components (siliconbench/coordinator/history/points.components) that are an engine's version: its packages, the
# build number and the commit (stored under the engine's name).
VERSION_COMPONENTS: frozenset[str] = frozenset({k for e in ENGINES.values() for k in (e.name, *e.pinned, *e.order_by)})


def describe(name: str) -> EngineDescription:
    """The description of engine ``name``; KeyError naming the known engines for any other."""
    try:
        return ENGINES[name]
    except KeyError:
        raise KeyError(f"unknown engine {name!r}; known: {', '.join(ENGINES)}") from None


def by_format(fmt: str) -> list[str]:
    """The engines that load artifacts of format ``fmt``."""
    return [e.name for e in ENGINES.values() if e.format == fmt]
