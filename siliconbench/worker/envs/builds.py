"""llama.cpp builds as engine versions: ``siliconbench env add llama.cpp --source DIR --ref REF``.

A build (``siliconbench.worker.builds.compile``) is recorded in the same registry as package environments, so a sweep names it
in ``engine_versions`` beside llama-cpp-python releases (by its name, its version ``b7123`` / ``b7123+abcdef0``,
or a prefix of its commit) and ``env list`` shows it. Its interpreter is the one whose llama-cpp-python binding can
drive its library (this worker's own, or a llama-cpp-python environment's whose vendored ``llama.h`` matches);
where none can, the worker's own, and its jobs are measured through the build's llama-bench
(``siliconbench.worker.builds.driver``). The job's child is told the build by ``SILICONBENCH_LLAMA_BUILD`` (``child_vars``).
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from siliconbench.contract.errors import UserError

from siliconbench.worker.builds import compile as compiler, header, prebuilt, source
from siliconbench.worker.envs.venvs import EngineEnv, _locked, _read, _write, env_for, envs_root, list_envs

ENGINE = "llama.cpp"
BUILD_PACKAGE = "llama.cpp"  # what a build environment's `package` says: a source tree, not a distribution


def _binding_for(build: compiler.Build, root: Path | str | None) -> tuple[str, dict]:
    """(interpreter, header check) of the first binding that can drive ``build``: this interpreter's, then each
    llama-cpp-python environment's; this interpreter's check (failed) when none can."""
    candidates = [sys.executable] + [e.python for e in list_envs(root) if e.engine == ENGINE and not e.build and e.ok()]
    first = None
    for python in dict.fromkeys(candidates):
        try:
            found = header.check(build.header, python)
        except UserError:
            continue
        first = first or (python, found)
        if found.ok:
            return python, found.as_dict()
    if first is None:
        raise UserError("env", "no interpreter here has llama-cpp-python, whose binding the worker's jobs need.")
    return first[0], first[1].as_dict()


def add_build(
    source_dir: str | Path,
    ref: str | None = None,
    *,
    name: str | None = None,
    cmake_flags: list[str] | None = None,
    tools: tuple[str, ...] = compiler.TOOLS,
    root: Path | str | None = None,
    progress: Callable[[str], None] | None = None,
) -> EngineEnv:
    """Build ``ref`` of ``source_dir`` (once per commit and options) and record it as an engine version."""
    say = progress or (lambda _m: None)
    rev = source.resolve(source_dir, ref)
    named = name is not None
    name = name or f"{ENGINE}-{rev.label}"
    if not name.replace("-", "").replace(".", "").replace("+", "").replace("_", "").isalnum():
        raise UserError("--name", f"{name!r}: use letters, digits, '.', '-', '_' and '+' only.")
    _not_a_package_env(name, root)
    built = compiler.build(rev, extra_flags=cmake_flags, tools=tools, progress=say)
    if not named:  # the build is recorded already (`env add --name lc-A`): that record, not a second name for it
        for env in list_envs(root):
            if env.build and _serves(env.build, built, tools) and env.ok():
                say(f"{rev.label}: recorded already as {env.name}")
                return env
    return _record(built, name, [f"{rev.source}@{rev.sha}"] + list(cmake_flags or []), root, say)


def _serves(recorded: dict, built: compiler.Build, tools: tuple[str, ...]) -> bool:
    """Whether a recorded build answers a request that found ``built``: the same folder, or another build of the
    same commit, backend and flags with every tool asked for (the kept builds may hold both)."""
    return recorded.get("path") == built.path or compiler.serves(
        recorded, built.revision.get("sha"), built.backend, built.cmake_flags, tools
    )


def add_prebuilt_env(
    path: str | Path, *, name: str | None = None, root: Path | str | None = None, progress=None
) -> EngineEnv:
    """Record a llama.cpp release archive or installed prefix (``--prebuilt``) as an engine version."""
    say = progress or (lambda _m: None)
    if name:
        _not_a_package_env(name, root)
    built = prebuilt.add_prebuilt(path, progress=say)
    name = name or f"{ENGINE}-{built.rev.label}"
    return _record(built, name, [str(path)], root, say)


def _not_a_package_env(name: str, root) -> None:
    base = envs_root(root)
    existing = _read(base).get(name) if base.exists() else None
    if existing is not None and not existing.build:
        raise UserError("--name", f"{name!r} is a package environment here; pass another --name.")


def _record(built: compiler.Build, name: str, requirements: list[str], root, say) -> EngineEnv:
    rev = built.rev
    if not name.replace("-", "").replace(".", "").replace("+", "").replace("_", "").isalnum():
        raise UserError("--name", f"{name!r}: use letters, digits, '.', '-', '_' and '+' only.")
    base = envs_root(root)
    python, compat = _binding_for(built, root)
    say(
        f"{rev.label}: llama-cpp-python {compat['binding']} can drive it"
        if compat["compatible"]
        else f"{rev.label}: no binding here matches its llama.h ({compat['first_difference']}); its jobs are "
        "measured through its own llama-bench"
    )
    env = EngineEnv(
        name=name,
        engine=ENGINE,
        package=BUILD_PACKAGE,
        version=rev.label,
        path=built.path,
        python=python,
        requirements=requirements,
        packages={"llama-cpp-python": compat["binding"]} if compat["compatible"] else {},
        python_version=platform.python_version(),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        build={**asdict(built), "compatibility": compat},
    )
    with _locked(base):
        envs = _read(base)
        old = envs.get(name)
        if old is not None and old.build and old.build.get("revision", {}).get("sha") != rev.sha:
            raise UserError(
                "--name", f"{name!r} is the build of {old.build['revision']['sha'][:12]}; remove it first or rename."
            )
        envs[name] = env
        _write(base, envs)
    return env


def child_vars(engine: str, version: str | None, root: Path | str | None = None) -> dict[str, str]:
    """What a job's child needs to run on the build ``version`` names (nothing for any other version)."""
    env = env_for(engine, version, root) if version else None
    if env is None or not env.build:
        return {}
    return {"SILICONBENCH_LLAMA_BUILD": env.build["path"]}


def build_dir_of(env: EngineEnv) -> Path:
    return Path(env.build["path"])
