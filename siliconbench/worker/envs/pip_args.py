"""How pip is asked to fill an engine environment: its options and requirements, the constraints that pin what
the child process imports, where wheels are looked for, and what a failed install says.

Kept apart from ``siliconbench.worker.envs.venvs`` (which owns the environments and their registry) so the pip command line can
grow (find-links folders, a package index) without the registry's module growing with it.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version as installed_version
from pathlib import Path

from siliconbench.contract.settings import env_setting

# What siliconbench.worker.job.child_main and the contract import, pinned to this interpreter's versions.
CHILD_DEPS = ("pydantic", "pydantic-settings", "pyyaml", "psutil", "numpy")

FindLinks = Path | str | Iterable[Path | str] | None


def default_find_links() -> Path | None:
    """The wheel cache bootstrap fills (llama-cpp-python built once), if this machine has one."""
    wheels = Path(env_setting("wheel_cache") or Path.home() / ".cache" / "siliconbench" / "wheels")
    return wheels if wheels.is_dir() else None


def find_links_of(given: FindLinks) -> list[Path]:
    """The given folders (one or several), then the wheel cache: the cache is always looked in."""
    if given is None:
        given = []
    elif isinstance(given, (str, Path)):
        given = [given]
    folders = [Path(g).expanduser() for g in given if str(g)]
    cache = default_find_links()
    return list(dict.fromkeys([*folders, *([cache] if cache else [])]))


def requirement_names(reqs: Iterable[str]) -> set[str]:
    return {r.split("[")[0].split("=")[0].split("<")[0].split(">")[0].strip().lower() for r in reqs}


def pip_args(
    package: str, version: str, extra: list[str], *, find_links: list[Path], index_url: str | None, allow_build: bool
) -> tuple[list[str], list[str]]:
    """(pip options, requirements) that install one engine version and what the child needs.

    ``find_links`` folders serve any package (the watch's local index is a folder of mlx-lm wheels);
    ``index_url`` replaces PyPI (``--index-url``)."""
    reqs = [f"{package}=={version}", *extra]
    opts: list[str] = []
    if package == "mlx-lm" and platform.system() == "Linux" and "mlx" not in requirement_names(extra):
        reqs.append("mlx[cpu]")  # mlx-lm requires mlx only on Darwin; the CPU build is an extra on Linux
    for folder in find_links:
        opts += ["--find-links", str(folder)]
    if index_url:
        opts += ["--index-url", index_url]
    if package == "llama-cpp-python" and platform.system() != "Darwin" and not allow_build:
        opts += ["--only-binary", "llama-cpp-python"]  # a source build takes 6-9 minutes on 2 cores
    return opts, reqs + list(CHILD_DEPS)


def constraints() -> str:
    """Pins of the child's own dependencies to this interpreter's versions: only the engine moves."""
    lines = []
    for dist in CHILD_DEPS:
        try:
            lines.append(f"{dist}=={installed_version(dist)}")
        except PackageNotFoundError:
            continue
    return "\n".join(lines) + "\n"


def install_error(
    requirement: str, package: str, version: str, opts: list[str], find_links: list[Path], stderr: str
) -> str:
    """What a failed pip install says: pip's own last lines, and how to get a llama-cpp-python wheel."""
    tail = "\n".join(line for line in stderr.strip().splitlines() if "Location" not in line)[-1500:]
    hint = ""
    if package == "llama-cpp-python" and "--only-binary" in opts:
        where = ", ".join(map(str, find_links)) or "no wheel cache"
        hint = (
            f" No prebuilt wheel of llama-cpp-python {version} was found (looked in {where} and the index); "
            "build one once with `pip wheel --no-deps -w WHEELS llama-cpp-python==VERSION`, or pass --allow-build."
        )
    return f"pip could not install {requirement}:{hint}\n{tail}"
