"""A real llama.cpp git history for the tests and benchmarks of builds and bisection, made without a network.

The base commit is the llama.cpp tree that the pinned llama-cpp-python sdist vendors (kept by
scripts/build_llama_tools.sh in the tools cache), so the worker's own binding matches its ``llama.h``. On top:

1. ``io: a comment`` — harmless, in ``src/llama-io.cpp``;
2. ``ggml-cpu: planted slowdown`` — every CPU graph computation first sleeps ``PLANTED_SLEEP_MS`` (each decode
   step is one graph: decode slows tens of times, prefill barely), the regression a bisection must find;
3. ``cparams: a comment`` — harmless, in ``src/llama-cparams.cpp``;
4. ``llama.h: a new field`` — ``llama_model_params`` gains a last field (a bigger struct passed by value), so the binding no longer matches
   and a job on this commit must be measured through the build's llama-bench.

Authors and dates are fixed, so every machine makes the same commit shas, and the builds cache (kept between test
runs) is hit after the first run. The small files keep every incremental build to a few files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path


def kept_dir(name: str, override: str | None = None) -> Path:
    """``<cache>/siliconbench/<name>`` (as tests/kept.py keeps the test models), or what ``override`` names."""
    if override and os.environ.get(override):
        return Path(os.environ[override])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "siliconbench" / name


TOOLS_CACHE = kept_dir("tools", "SILICONBENCH_TOOLS_CACHE")
LLAMA_VERSION = "0.3.36"
# A decode step of the tiny test model takes ~0.15 ms here: 5 ms is a 30-fold slowdown (20 ms measured 0.0069x),
# and each job on a bad commit waits ~0.6 s instead of ~2.5 s.
PLANTED_SLEEP_MS = 5
PLANTED_FILE = "ggml/src/ggml-cpu/ggml-cpu.c"
GRAPH_COMPUTE = "enum ggml_status ggml_graph_compute(struct ggml_cgraph * cgraph, struct ggml_cplan * cplan) {\n"
PLANTED_LINE = (
    f"    {{ struct timespec planted = {{0, {PLANTED_SLEEP_MS} * 1000 * 1000}}; nanosleep(&planted, NULL); }}\n"
)
REPO = kept_dir("test-llama-repo")
BUILDS = kept_dir("test-llama-builds")  # SILICONBENCH_BUILDS_DIR of the tests: kept between runs
GIT_ENV = {
    "GIT_AUTHOR_NAME": "siliconbench tests",
    "GIT_AUTHOR_EMAIL": "tests@siliconbench.invalid",
    "GIT_COMMITTER_NAME": "siliconbench tests",
    "GIT_COMMITTER_EMAIL": "tests@siliconbench.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}
SUBJECTS = (
    f"llama.cpp as llama-cpp-python {LLAMA_VERSION} vendors it",
    "io: a comment",
    "ggml-cpu: planted slowdown",
    "cparams: a comment",
    "llama.h: a new field",
)


def vendored_tree() -> Path:
    tree = TOOLS_CACHE / f"llama.cpp-{LLAMA_VERSION}" / "src"
    if not (tree / "include" / "llama.h").exists():
        raise RuntimeError(f"{tree} is missing: run `make bootstrap` (scripts/build_llama_tools.sh keeps it)")
    return tree


def _git(repo: Path, *args: str, day: int = 1) -> str:
    env = {**os.environ, **GIT_ENV, "GIT_AUTHOR_DATE": f"2026-01-0{day}T12:00:00Z"}
    env["GIT_COMMITTER_DATE"] = env["GIT_AUTHOR_DATE"]
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True).stdout


def _commit(repo: Path, day: int) -> None:
    _git(repo, "add", "-A", day=day)
    _git(repo, "commit", "-q", "--no-verify", "--no-gpg-sign", "-m", SUBJECTS[day - 1], day=day)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new, 1))


def _is_current(dest: Path) -> bool:
    """The kept repository has every commit, and its planted slowdown is this file's (a change of it makes it again)."""
    if not (dest / ".git").exists() or len(_git(dest, "rev-list", "HEAD").split()) != len(SUBJECTS):
        return False
    return PLANTED_LINE in _git(dest, "show", f"HEAD~2:{PLANTED_FILE}")


def make_repo(dest: Path = REPO) -> Path:
    """The repository (made once; its commits are the same on every machine). Returns its folder."""
    if _is_current(dest):
        return dest
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(vendored_tree(), tmp, ignore=shutil.ignore_patterns(".git", "build"))
    subprocess.run(["git", "init", "-q", "-b", "master", str(tmp)], check=True, env={**os.environ, **GIT_ENV})
    _commit(tmp, 1)
    _git(tmp, "tag", "b1", day=1)
    _edit(tmp / "src/llama-io.cpp", '#include "llama-io.h"\n', '#include "llama-io.h"\n\n// a harmless comment\n')
    _commit(tmp, 2)
    _edit(tmp / PLANTED_FILE, GRAPH_COMPUTE, GRAPH_COMPUTE + PLANTED_LINE)
    _commit(tmp, 3)
    _edit(tmp / "src/llama-cparams.cpp", '#include "llama-cparams.h"\n', '#include "llama-cparams.h"\n// harmless\n')
    _commit(tmp, 4)
    _git(tmp, "tag", "b4", day=4)
    _edit(
        tmp / "include/llama.h",
        "        bool load_mtp;        // whether to load MTP layers\n    };\n",
        "        bool load_mtp;        // whether to load MTP layers\n        int64_t planted_field; // a bigger struct\n    };\n",
    )
    _commit(tmp, 5)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def release_archive(bin_dir: Path, dest: Path) -> Path:
    """A zip in the shape of llama.cpp's release archives (``build/bin/...``, Unix modes kept) of a build's bin/."""
    with zipfile.ZipFile(dest, "w") as z:
        for f in sorted(bin_dir.iterdir()):
            info = zipfile.ZipInfo(f"build/bin/{f.name}")
            info.external_attr = (f.stat().st_mode & 0o777) << 16
            z.writestr(info, f.read_bytes())
    return dest


def shas(repo: Path = REPO) -> list[str]:
    """The commits, oldest first."""
    return _git(repo, "rev-list", "--reverse", "HEAD").split()


if __name__ == "__main__":
    print(make_repo())
    for s, subject in zip(shas(), SUBJECTS, strict=False):
        print(s[:12], subject)
