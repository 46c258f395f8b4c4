"""A llama.cpp someone else built: a release archive (``llama-bNNNN-bin-macos-arm64.zip`` / ``.tar.gz``) or an
installed prefix (Homebrew's ``$(brew --prefix llama.cpp)``), recorded as a build without compiling anything.

Its identity is the content digest of the archive (or of the folder's libraries and tools): two downloads of one
release are one version, a re-released archive is another. Its build number and commit are what its own tools
say (``llama-server --version`` / ``llama-cli --version``: ``version: 7123 (abcdef0)``), never the file name.
Libraries and tools are copied side by side into the builds folder's ``out/``, as a build from source leaves them;
the header is kept when the archive has one (release archives do not ship ``llama.h``: without it no binding is
trusted with the library, and jobs are measured through its llama-bench).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from siliconbench.contract.errors import UserError

from siliconbench.worker.builds.compile import Build, builds_root
from siliconbench.worker.builds.source import Revision

VERSION = re.compile(r"version:\s*(\d+)\s*\(([0-9a-f]+)\)")
LIBRARY = re.compile(r"^lib(llama|ggml|mtmd|common)[\w.-]*\.(so[\d.]*|dylib)$")


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and _wanted(p))
    for f in files:
        h.update(f.name.encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:16]


def _wanted(p: Path) -> bool:
    return bool(LIBRARY.match(p.name)) or p.name.startswith("llama-") or p.name == "llama.h"


def _unpack(path: Path, dest: Path) -> Path:
    if path.is_dir():
        return path
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            z.extractall(dest)
            for info in z.infolist():  # zip keeps Unix modes in the high bits; extractall drops them
                mode = info.external_attr >> 16
                if mode:
                    os.chmod(dest / info.filename, mode & 0o777)
        return dest
    if tarfile.is_tarfile(path):
        with tarfile.open(path) as t:
            t.extractall(dest, filter="tar")
        return dest
    raise UserError("--prebuilt", f"{path} is neither a folder nor a .zip / .tar.gz archive.")


# The build info llama.cpp compiles into its common library (common/build-info.cpp), read in a throwaway process.
READ_BUILD_INFO = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
print(ctypes.c_int.in_dll(lib, "LLAMA_BUILD_NUMBER").value, ctypes.c_char_p.in_dll(lib, "LLAMA_COMMIT").value.decode())
"""


def _version(bin_dir: Path) -> tuple[int | None, str]:
    """(build number, commit) as the build states them: its tools' --version, else its common library's data."""
    for tool in ("llama-server", "llama-cli"):
        exe = bin_dir / tool
        if exe.exists():
            out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60)
            if m := VERSION.search(out.stdout + out.stderr):
                return int(m.group(1)), m.group(2)
    for lib in sorted(bin_dir.glob("lib*common*")):
        out = subprocess.run(
            [sys.executable, "-c", READ_BUILD_INFO, str(lib)], capture_output=True, text=True, timeout=60
        )
        if out.returncode == 0 and len(parts := out.stdout.split()) == 2 and parts[0].isdigit():
            return int(parts[0]), parts[1]
    return None, ""


def add_prebuilt(path: Path | str, progress=None) -> Build:
    """Record a release archive or an installed llama.cpp as a build (copied once into the builds folder)."""
    say = progress or (lambda _m: None)
    src = Path(path).expanduser().resolve()
    if not src.exists():
        raise UserError("--prebuilt", f"{src} does not exist.")
    digest = _digest(src)
    out = builds_root() / "out" / f"prebuilt-{digest}"
    if (out / "build.json").exists():
        say(f"{src.name}: recorded already ({out})")
        return Build(**json.loads((out / "build.json").read_text()))
    with tempfile.TemporaryDirectory(prefix="sb-prebuilt-") as tmp:
        root = _unpack(src, Path(tmp))
        bench = next((p for p in root.rglob("llama-bench") if p.is_file()), None)
        if bench is None:
            raise UserError("--prebuilt", f"{src} holds no llama-bench: not a llama.cpp build with its tools.")
        staging = out.with_name(out.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        (staging / "bin").mkdir(parents=True)
        (staging / "include").mkdir()
        for f in root.rglob("*"):
            if f.is_file() and (LIBRARY.match(f.name) or (f.name.startswith("llama-") and os.access(f, os.X_OK))):
                shutil.copy2(f, staging / "bin" / f.name)
        if header := next((p for p in root.rglob("llama.h") if p.is_file()), None):
            shutil.copy2(header, staging / "include" / "llama.h")
        number, commit = _version(staging / "bin")
    label = f"b{number}" if number is not None else f"prebuilt-{digest}"
    rev = Revision(
        sha=f"prebuilt-{digest}",
        number=number,
        describe=f"{label} ({commit})" if commit else label,
        subject=f"prebuilt {src.name}" + (f" (commit {commit})" if commit else ""),
        lineage="prebuilt",
        source=str(src),
    )
    build = Build(
        revision=asdict(rev),
        backend="Metal" if any(staging.glob("bin/*.dylib")) else "CPU/CUDA (prebuilt)",
        cmake_flags=[],
        options_digest=digest,
        compiler="",
        tools=sorted(p.name for p in (staging / "bin").glob("llama-*")),
        path=str(out),
        built_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    (staging / "build.json").write_text(json.dumps(asdict(build), indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    say(f"{src.name}: {label} (commit {commit or 'unknown'}), {len(build.tools)} tools")
    return build
