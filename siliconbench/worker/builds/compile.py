"""Build a llama.cpp revision once per commit and build options, into a cache: shared libraries and tools.

Layout under the builds folder (``SILICONBENCH_BUILDS_DIR``, default ``~/.cache/siliconbench/llama-builds``):

- ``trees/<lineage>-<options>/src`` and ``build``: one incremental build tree per repository and build options.
  A new commit's files are written over ``src`` only where their content differs, so the build system's
  timestamps see exactly the files the commit changed, and the next commit recompiles only those (any clone of
  llama.cpp shares a root commit, so they share one tree).
- ``out/<commit>-<options>/``: what a job and a bisection use, frozen: ``bin/`` (libllama, libggml*, llama-bench,
  llama-server, llama-perplexity, each finding its libraries beside itself), ``include/llama.h`` and
  ``build.json`` (the record: commit, build number, describe, compiler, cmake flags, backend, build time).

The backend is the host's: Metal on a Mac, CUDA where ``nvcc`` is found, the CPU otherwise (as llama.cpp's own
CMake chooses on a Mac; CUDA asked for explicitly, as llama.cpp requires).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from siliconbench.contract.errors import UserError
from siliconbench.contract.settings import env_setting

from siliconbench.worker.builds.source import Revision, export

LIBRARY_TARGET = "llama"  # libllama and the ggml libraries it links
TOOLS = ("llama-bench", "llama-server", "llama-perplexity")  # llama-bench is required: the build's own yardstick
BUILD_TIMEOUT_S = 3 * 3600
Progress = Callable[[str], None]


@dataclass
class Build:
    """A finished build of one revision with one set of options (``build.json``)."""

    revision: dict  # Revision.as_dict()
    backend: str  # Metal | CUDA | CPU
    cmake_flags: list[str]
    options_digest: str
    compiler: str
    tools: list[str]
    path: str  # the out folder; bin/ holds libraries and tools
    built_at: str = ""
    build_s: float = 0.0  # wall time of this build (configure + compile + copy)
    incremental: bool = False  # an existing build tree was reused
    changed_files: int = 0  # files the commit changed against the tree's previous commit (all files: cold)
    host: str = field(default_factory=platform.node)
    missing_targets: list[str] = field(default_factory=list)  # tools asked for that this revision has no target for

    @property
    def bin_dir(self) -> Path:
        return Path(self.path) / "bin"

    @property
    def header(self) -> Path:
        return Path(self.path) / "include" / "llama.h"

    @property
    def rev(self) -> Revision:
        return Revision(**self.revision)

    def tool(self, name: str) -> Path:
        path = self.bin_dir / name
        if not path.exists():
            raise UserError("tool", f"the build {self.rev.label} has no {name} (built: {', '.join(self.tools)}).")
        return path


def builds_root() -> Path:
    return Path(env_setting("builds_dir") or Path.home() / ".cache" / "siliconbench" / "llama-builds").expanduser()


def host_backend() -> str:
    """Metal on a Mac; CUDA where nvcc and an NVIDIA device are both here (a CUDA toolkit on a machine with no
    GPU cannot configure llama.cpp's CUDA backend); the CPU otherwise."""
    if sys.platform == "darwin":
        return "Metal"
    nvcc = shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists()
    if nvcc and Path("/dev/nvidia0").exists():
        return "CUDA"
    return "CPU"


def revision_flags(rev: Revision) -> list[str]:
    """What the build names itself (llama-bench's build_commit / build_number): the exported tree has no .git
    for llama.cpp's cmake/build-info.cmake to ask, so the revision is passed in. Not part of the options."""
    if rev.number is None:
        return [f"-DLLAMA_BUILD_COMMIT={rev.sha}"]
    return [f"-DLLAMA_BUILD_NUMBER={rev.number}", f"-DLLAMA_BUILD_COMMIT={rev.sha[:7]}"]


def cmake_flags(backend: str, extra: list[str] | None = None) -> list[str]:
    """The flags every build gets: shared libraries (the binding loads libllama), tools beside their libraries
    (``$ORIGIN`` / ``@loader_path``), no network, no tests; the backend's own switch; then the user's."""
    flags = [
        "-DCMAKE_BUILD_TYPE=Release",
        "-DBUILD_SHARED_LIBS=ON",
        "-DLLAMA_CURL=OFF",
        "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_SERVER=ON",
    ]
    if backend == "Metal":
        flags += ["-DGGML_METAL=ON", "-DCMAKE_BUILD_RPATH=@loader_path"]
    else:
        flags += ["-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON", "-DCMAKE_BUILD_RPATH=$ORIGIN"]
    if backend == "CUDA":
        flags += ["-DGGML_CUDA=ON"]
    if backend == "CPU":
        flags += ["-DGGML_NATIVE=OFF"]  # portable, as the llama-cpp-python wheel the bootstrap builds
    for f in extra or []:
        if not f.startswith("-D"):
            raise UserError("--cmake-flag", f"{f!r}: pass cmake cache entries as -DNAME=VALUE.")
    return flags + list(extra or [])


def options_digest(backend: str, flags: list[str], tools: tuple[str, ...]) -> str:
    return hashlib.sha256(json.dumps([backend, flags, sorted(tools)]).encode()).hexdigest()[:10]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.mkdir(parents=True, exist_ok=True)
    with open(path / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two builds in one tree at once would mix their commits
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def sync(staging: Path, tree: Path) -> int:
    """Make ``tree`` hold exactly ``staging``'s files, rewriting only those whose content differs (their
    timestamps are what an incremental build goes by). Returns how many files changed."""
    changed = 0
    want: set[Path] = set()
    for root, _dirs, files in os.walk(staging):
        for f in files:
            rel = Path(root, f).relative_to(staging)
            want.add(rel)
            src, dst = staging / rel, tree / rel
            data = src.read_bytes()
            if dst.is_file() and not dst.is_symlink() and dst.read_bytes() == data:
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.is_symlink() or dst.exists():
                dst.unlink()
            dst.write_bytes(data)
            os.chmod(dst, src.stat().st_mode & 0o777)
            changed += 1
    for root, _dirs, files in os.walk(tree):
        for f in files:
            rel = Path(root, f).relative_to(tree)
            if rel not in want:
                (tree / rel).unlink()
                changed += 1
    return changed


def _run(cmd: list[str], log: Path, cwd: Path | None = None) -> None:
    with open(log, "a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, timeout=BUILD_TIMEOUT_S).returncode
    if rc != 0:
        tail = log.read_text(errors="replace")[-2500:]
        raise UserError("build", f"`{' '.join(cmd[:3])} ...` failed (exit {rc}); the log's end:\n{tail}")


def _targets(build_dir: Path) -> set[str]:
    out = subprocess.run(
        ["cmake", "--build", str(build_dir), "--target", "help"], capture_output=True, text=True, timeout=120
    ).stdout
    return {line.split(":")[0].strip().lstrip(". ") for line in out.splitlines() if ":" in line}


def compiler_of(build_dir: Path) -> str:
    cache = build_dir / "CMakeCache.txt"
    path = ""
    for line in cache.read_text(errors="replace").splitlines() if cache.exists() else []:
        if line.startswith("CMAKE_CXX_COMPILER:"):
            path = line.split("=", 1)[1]
    if not path:
        return ""
    try:
        first = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()
    except OSError:
        return path
    return first[0].strip() if first else path


def find(rev: Revision, backend: str, flags: list[str], tools: tuple[str, ...] = TOOLS) -> Build | None:
    """A finished build of ``rev`` with these flags that has every tool asked for (a build with more tools
    serves a request for fewer: `env add` then a bisection build a commit once)."""
    exact = builds_root() / "out" / f"{rev.short}-{options_digest(backend, flags, tools)}" / "build.json"
    records = [exact] if exact.exists() else []
    records += sorted((builds_root() / "out").glob(f"{rev.short}-*/build.json"))
    for record in records:
        try:
            data = json.loads(record.read_text())
            b = Build(**data)
        except (OSError, ValueError, TypeError):
            continue  # a half-written record of an interrupted build: not a build
        if serves(data, rev.sha, backend, flags, tools):
            return b
    return None


def serves(record: dict, sha: str, backend: str, flags: list[str], tools: tuple[str, ...]) -> bool:
    """Whether a build's record (``build.json``, or the one an engine environment keeps) is of this commit,
    backend and flags with every tool asked for: a build with more tools serves a request for fewer."""
    has = set(record.get("tools") or []) | set(record.get("missing_targets") or [])
    return (
        (record.get("revision") or {}).get("sha") == sha
        and record.get("backend") == backend
        and record.get("cmake_flags") == flags
        and set(tools) <= has
    )


def build(
    rev: Revision,
    *,
    extra_flags: list[str] | None = None,
    tools: tuple[str, ...] = TOOLS,
    progress: Progress | None = None,
) -> Build:
    """Build ``rev`` (or return its cached build): the library and ``tools`` (those the revision has)."""
    say = progress or (lambda _m: None)
    backend = host_backend()
    flags = cmake_flags(backend, extra_flags)
    digest = options_digest(backend, flags, tools)
    if cached := find(rev, backend, flags, tools):
        say(f"{rev.label}: built already ({cached.path})")
        return cached
    root = builds_root()
    # One incremental tree per lineage and flags, whatever the tools: a bisection's llama-bench-only builds and
    # `env add`'s full ones share the compiled objects.
    tree = root / "trees" / f"{rev.lineage[:12]}-{options_digest(backend, flags, ())}"
    out = root / "out" / f"{rev.short}-{digest}"
    with _locked(tree):
        if cached := find(rev, backend, flags, tools):
            return cached
        if shutil.which("cmake") is None:
            raise UserError(
                "--source",
                "building llama.cpp needs cmake, which is not installed here (macOS: brew install cmake; Debian: "
                "apt install cmake; or pip install cmake), or record a release with --prebuilt.",
            )
        t0 = time.perf_counter()
        src, bdir = tree / "src", tree / "build"
        incremental = (bdir / "CMakeCache.txt").exists()
        with tempfile.TemporaryDirectory(prefix="sb-llama-src-", dir=root) as staging:
            export(rev, Path(staging))
            src.mkdir(parents=True, exist_ok=True)
            changed = sync(Path(staging), src)
        log = tree / "build.log"
        log.write_text(f"# {rev.label} {rev.sha} ({rev.subject})\n")
        say(
            f"{rev.label}: {'incremental build' if incremental else 'first build in this tree'}, {changed} files changed"
        )
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        _run(["cmake", "-S", str(src), "-B", str(bdir), *gen, *flags, *revision_flags(rev)], log)
        have = _targets(bdir)
        if "llama-bench" not in have:
            raise UserError("--ref", f"{rev.label} has no llama-bench target: too old a llama.cpp to measure.")
        wanted = [LIBRARY_TARGET, *(t for t in tools if t in have)]
        if missing := [t for t in tools if t not in have]:
            say(f"{rev.label} has no target {', '.join(missing)}: built without it")
        _run(["cmake", "--build", str(bdir), "-j", str(os.cpu_count() or 2), "--target", *wanted], log)
        _collect(bdir, src, out, wanted)
        result = Build(
            revision=rev.as_dict(),
            backend=backend,
            cmake_flags=flags,
            options_digest=digest,
            compiler=compiler_of(bdir),
            tools=[t for t in tools if (out / "bin" / t).exists()],
            path=str(out),
            built_at=datetime.now(UTC).isoformat(timespec="seconds"),
            build_s=round(time.perf_counter() - t0, 1),
            incremental=incremental,
            changed_files=changed,
            missing_targets=missing,
        )
        (out / "build.json").write_text(json.dumps(asdict(result), indent=2) + "\n")
        say(f"{rev.label}: built in {result.build_s:.0f} s ({result.compiler})")
        return result


def _collect(bdir: Path, src: Path, out: Path, targets: list[str]) -> None:
    """Copy the libraries and this build's tools (llama.cpp puts both in build/bin) and the header into the frozen
    out folder. A tool the shared tree holds from another commit's build is left out: not this commit's tool."""
    if out.exists():
        shutil.rmtree(out)  # a half-made folder of an interrupted build: never recorded

    def others(_folder: str, names: list[str]) -> list[str]:
        return [n for n in names if n.startswith("llama-") and not _is_library(n) and n not in targets]

    (out / "include").mkdir(parents=True)
    shutil.copytree(bdir / "bin", out / "bin", symlinks=True, ignore=others)
    for lib in bdir.rglob("*"):  # older trees leave libraries beside their targets, not in bin/
        if lib.is_file() and _is_library(lib.name) and "bin" not in lib.parts:
            shutil.copy2(lib, out / "bin" / lib.name, follow_symlinks=True)
    shutil.copy2(src / "include" / "llama.h", out / "include" / "llama.h")


def _is_library(name: str) -> bool:
    return name.endswith((".so", ".dylib")) or ".so." in name
