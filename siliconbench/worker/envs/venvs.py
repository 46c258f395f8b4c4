"""Engine environments: several versions of an engine side by side on one worker, one venv each.

``siliconbench env add mlx-lm==0.31.3`` makes ``<envs dir>/mlx-lm-0.31.3`` (a virtual environment of this
worker's Python) and records it in ``<envs dir>/registry.json``. A job whose ``engine_version`` names that
version runs its child process under the environment's interpreter, so two versions of one engine are
measured on the same hardware in one sweep. The envs dir is ``<data dir>/envs`` unless
``SILICONBENCH_ENVS_DIR`` says otherwise.

An environment holds the engine (on Linux, mlx-lm with a compatible ``mlx[cpu]``), plus what
``python -m siliconbench.worker.job.child_main`` imports from this checkout (pydantic, pydantic-settings, pyyaml, psutil,
numpy), pinned to the versions this interpreter runs so that only the engine moves between environments.
It is fully isolated (no system site-packages): the engine's own dependencies are the ones its release
resolves to, and every installed version is recorded.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version as installed_version
from pathlib import Path

from siliconbench.contract.engines import ENGINE_PACKAGE, ENGINES
from siliconbench.contract.errors import UserError
from siliconbench.contract.settings import data_dir, env_setting

from siliconbench import import_root
from siliconbench.worker.envs import pip_args as _pip
from siliconbench.worker.envs.pip_args import FindLinks, constraints, find_links_of, install_error, pip_args
from siliconbench.worker.platform.locks import exclusive

ENVS_DIR_VAR = "SILICONBENCH_ENVS_DIR"
REGISTRY = "registry.json"
PACKAGE_ENGINE = {e.package: e.name for e in ENGINES.values()}  # only an engine package is a version of it
ENGINE_MODULES = {e.name: e.modules for e in ENGINES.values()}
# Recorded per environment: the distributions whose versions can move a number or break the child.
RECORDED = ("llama-cpp-python", "mlx", "mlx-cpu", "mlx-lm", "numpy", "transformers", "pydantic", "psutil")
PIP_TIMEOUT_S = 1800
default_find_links = _pip.default_find_links  # where it always was: `env add`'s wheel cache


@dataclass
class EngineEnv:
    name: str
    engine: str
    package: str
    version: str
    path: str
    python: str
    requirements: list[str]
    packages: dict[str, str] = field(default_factory=dict)
    python_version: str = ""
    created_at: str = ""
    # A llama.cpp build (siliconbench/worker/envs/builds.py): its out folder, revision, backend and the header check against
    # the binding of ``python``; empty for a package environment.
    build: dict = field(default_factory=dict)

    def ok(self) -> bool:
        return Path(self.python).exists() and (not self.build or (Path(self.build["path"]) / "build.json").exists())

    def matches(self, version: str) -> bool:
        """Whether a sweep's engine_versions entry names this environment: its name, version, or for a build a
        prefix of its commit (at least 7 hex digits)."""
        sha = self.build.get("revision", {}).get("sha", "") if self.build else ""
        return version in (self.name, self.version) or (len(version) >= 7 and bool(sha) and sha.startswith(version))


def envs_root(root: Path | str | None = None) -> Path:
    if root is not None:
        return Path(root).expanduser()
    env = env_setting("envs_dir")
    return env.expanduser() if env else data_dir() / "envs"


def parse_requirement(req: str) -> tuple[str, str]:
    """``mlx-lm==0.31.3`` -> ("mlx-lm", "0.31.3"); only exact pins of an engine package."""
    pkg, sep, ver = req.strip().partition("==")
    pkg = pkg.strip().lower().replace("_", "-")
    if not sep or not ver.strip() or any(c in ver for c in "<>=!~*, "):
        raise UserError("requirement", f"{req!r} must pin one exact version, e.g. mlx-lm==0.31.3.")
    if pkg not in PACKAGE_ENGINE:
        raise UserError("requirement", f"{pkg!r} is not an engine package.", sorted(PACKAGE_ENGINE))
    return pkg, ver.strip()


def own_version(engine: str) -> str | None:
    """The engine package version of this interpreter (the worker's own), None if not installed."""
    try:
        return installed_version(ENGINE_PACKAGE[engine])
    except PackageNotFoundError:
        return None


# ------------------------------------------------------------------------------------------ registry


def _locked(root: Path) -> AbstractContextManager[None]:
    """The registry's lock: two `env add` at once must not lose each other's entry."""
    return exclusive(root / ".lock")


def _read(root: Path) -> dict[str, EngineEnv]:
    path = root / REGISTRY
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {name: EngineEnv(**e) for name, e in data.get("envs", {}).items()}


def _write(root: Path, envs: dict[str, EngineEnv]) -> None:
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".registry-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"envs": {n: asdict(e) for n, e in sorted(envs.items())}}, f, indent=2)
        f.write("\n")
    os.replace(tmp, root / REGISTRY)


def list_envs(root: Path | str | None = None) -> list[EngineEnv]:
    return sorted(_read(envs_root(root)).values(), key=lambda e: (e.engine, e.package, e.version, e.name))


# ------------------------------------------------------------------------------------------- install


def _probe(python: str, engine: str) -> dict[str, str]:
    """Import the engine and the child's own modules under ``python``; the installed versions."""
    code = (
        "import json, importlib, importlib.metadata as md\n"
        f"for m in {list(ENGINE_MODULES[engine])!r} + ['siliconbench.contract.results', 'siliconbench.worker.job.child_main']:\n"
        "    importlib.import_module(m)\n"
        "print(json.dumps({d.metadata['Name'].lower().replace('_', '-'): d.version for d in md.distributions()}))"
    )
    env = {**os.environ, "PYTHONPATH": import_root()}
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    if out.returncode != 0:
        raise UserError("requirement", f"the new environment cannot run a job: {out.stderr.strip()[-1500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def add(
    requirement: str,
    *,
    extra: list[str] | None = None,
    name: str | None = None,
    root: Path | str | None = None,
    find_links: FindLinks = None,
    index_url: str | None = None,
    allow_build: bool = False,
    progress: Callable[[str], None] | None = None,
) -> EngineEnv:
    """Create and record an environment holding ``requirement`` (e.g. ``mlx-lm==0.31.3``).

    ``extra`` pins more packages into it (``mlx[cpu]==0.31.2``). ``find_links`` (one folder or several) serves
    wheels of any package, the wheel cache (``SILICONBENCH_WHEEL_CACHE``) always after them; ``index_url``
    replaces PyPI. Idempotent: an environment of that name with the same requirements is returned as it is.
    """
    package, ver = parse_requirement(requirement)
    extra = list(extra or [])
    engine = PACKAGE_ENGINE[package]
    name = name or "+".join([f"{package}-{ver}", *(e.replace("==", "-") for e in extra)])
    if not name.replace("-", "").replace(".", "").replace("+", "").replace("_", "").isalnum():
        raise UserError("--name", f"{name!r}: use letters, digits, '.', '-', '_' and '+' only.")
    base = envs_root(root)
    say = progress or (lambda _msg: None)
    links = find_links_of(find_links)
    with _locked(base):
        envs = _read(base)
        if name in envs:
            old = envs[name]
            if old.requirements == [f"{package}=={ver}", *extra] and old.ok():
                say(f"{name} exists already")
                return old
            raise UserError(
                "env",
                f"an environment named {name!r} exists with other requirements "
                f"({', '.join(old.requirements)}); remove it first or pass --name.",
            )
        path = base / name
        if path.exists():
            shutil.rmtree(path)  # left by an interrupted add: never recorded, never used
        say(f"creating {path}")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
        python = str(path / "bin" / "python")
        cons = path / "siliconbench-constraints.txt"
        cons.write_text(constraints())
        opts, reqs = pip_args(package, ver, extra, find_links=links, index_url=index_url, allow_build=allow_build)
        say(f"installing {' '.join(reqs)}")
        # This interpreter's pip installs into the new one (`--python`): no pip inside, a current pip.
        pip = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                python,
                "--disable-pip-version-check",
                "install",
                "-q",
                "-c",
                str(cons),
                *opts,
                *reqs,
            ],
            capture_output=True,
            text=True,
            timeout=PIP_TIMEOUT_S,
        )
        if pip.returncode != 0:
            shutil.rmtree(path, ignore_errors=True)
            raise UserError("requirement", install_error(requirement, package, ver, opts, links, pip.stderr))
        try:
            versions = _probe(python, engine)
        except UserError:
            shutil.rmtree(path, ignore_errors=True)
            raise
        got = versions.get(package)
        if got != ver:
            shutil.rmtree(path, ignore_errors=True)
            raise UserError("requirement", f"asked for {package} {ver} but the environment holds {got}.")
        env = EngineEnv(
            name=name,
            engine=engine,
            package=package,
            version=ver,
            path=str(path),
            python=python,
            requirements=[f"{package}=={ver}", *extra],
            packages={k: versions[k] for k in RECORDED if k in versions},
            python_version=platform.python_version(),
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        envs[name] = env
        _write(base, envs)
        say(f"ready: {name} ({', '.join(f'{k} {v}' for k, v in env.packages.items())})")
        return env


def remove(name: str, root: Path | str | None = None) -> EngineEnv:
    """Delete an environment and its record; ``name`` may also be its requirement (mlx-lm==0.31.3). A llama.cpp
    build loses its record only: its folder stays in the builds cache for the next `env add` of that commit."""
    base = envs_root(root)
    with _locked(base):
        envs = _read(base)
        if name not in envs and "==" in name:
            package, ver = parse_requirement(name)
            matches = [n for n, e in envs.items() if e.package == package and e.version == ver]
            if len(matches) == 1:
                name = matches[0]
        if name not in envs:
            raise UserError("env", f"no engine environment {name!r} on this host.", sorted(envs))
        env = envs.pop(name)
        if not env.build:  # a build's folder is the builds cache's (SILICONBENCH_BUILDS_DIR), shared: kept
            shutil.rmtree(env.path, ignore_errors=True)
        _write(base, envs)
        return env


# -------------------------------------------------------------------------------------------- lookup


def available(engine: str, root: Path | str | None = None) -> list[str]:
    """Every version of ``engine`` this host can run: its own first, then its environments' (names too)."""
    own = own_version(engine)
    out = [own] if own else []
    for e in list_envs(root):
        if e.engine == engine and e.ok():
            out += [e.version, e.name] if e.name != f"{e.package}-{e.version}" else [e.version]
    return list(dict.fromkeys(out))


def env_for(engine: str, version: str | None, root: Path | str | None = None) -> EngineEnv | None:
    """The environment ``version`` names for ``engine`` (by name first, then the one version or commit it
    matches); None for the worker's own version or when several match (``python_for`` says which)."""
    if version is None:
        return None
    package = ENGINE_PACKAGE[engine]
    envs = [e for e in list_envs(root) if e.engine == engine and e.ok()]
    by_name = [e for e in envs if e.name in (version, f"{package}-{version}")]
    if by_name:
        return by_name[0]
    same = [e for e in envs if e.matches(version)]
    return same[0] if len(same) == 1 or _one_thing(same) else None


def _one_thing(envs: list[EngineEnv]) -> bool:
    """Several names for one build or environment (env add --name, then a bisection's build of that commit)."""
    return bool(envs) and len({(e.python, (e.build or {}).get("path", e.path)) for e in envs}) == 1


def python_for(
    engine: str,
    version: str | None,
    *,
    root: Path | str | None = None,
    install: bool = False,
    progress: Callable[[str], None] | None = None,
) -> str:
    """The interpreter that runs ``engine`` at ``version``: this one for its own version (or None), an
    environment's otherwise. A version nothing holds is a UserError, or installed first if ``install``."""
    if version is None or version == own_version(engine):
        return sys.executable
    package = ENGINE_PACKAGE[engine]
    found = env_for(engine, version, root)
    if found is not None:
        return found.python
    envs = [e for e in list_envs(root) if e.engine == engine and e.ok()]
    same = [e for e in envs if e.version == version]
    if _one_thing(same):
        return same[0].python
    if len(same) > 1:
        raise UserError(
            f"engine_versions.{engine}",
            f"{same[0].package} {version} is in several environments; name the one to use.",
            [e.name for e in same],
        )
    if install:
        return add(f"{package}=={version}", root=root, progress=progress).python
    raise UserError(
        f"engine_versions.{engine}",
        f"{package} {version} is not installed on this host ({platform.node()}); run "
        f"`siliconbench env add {package}=={version}` first, or set `install_versions: true` in the "
        "sweep to install it before the run.",
        available(engine, root),
    )


def interpreters(
    jobs, *, root: Path | str | None = None, install: bool = False, progress: Callable[[str], None] | None = None
) -> dict[tuple[str, str], str]:
    """(engine, engine_version) -> interpreter for every versioned job; raises before anything runs."""
    out: dict[tuple[str, str], str] = {}
    for job in jobs:
        key = (job.engine, job.engine_version)
        if job.engine_version is not None and key not in out:
            out[key] = python_for(job.engine, job.engine_version, root=root, install=install, progress=progress)
    return out
