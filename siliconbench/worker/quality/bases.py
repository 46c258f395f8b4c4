"""A full-precision model's next-token distributions on one token set, computed once and kept on the host.

A base is named by what determines it: the engine that ran it, the artifact's content digest, the digest of the
evaluated token ids and the first scored position. It lives in ``<models>/.kld-bases/`` as one ``.npz`` (the
uint16 rows of every window, as llama-perplexity's base file keeps them), written to a temporary name and
renamed, so two jobs computing the same base at once leave one whole file. Size: windows x scored positions x
vocabulary x 2 bytes (SmolLM2, 8 windows of 512: 200 MB), refused above ``MAX_BASE_BYTES``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from siliconbench.contract.engines import describe
from siliconbench.contract.errors import WorkloadError

from siliconbench.worker.quality.kld import BaseRows

MAX_BASE_BYTES = 4 * 2**30


@dataclass(frozen=True)
class BaseKey:
    engine: str
    sha256: str  # the base artifact's content digest
    tokens_sha256: str
    first: int  # the position whose logits predict the first scored token

    def path(self, models_dir: Path) -> Path:
        tag = describe(self.engine).format
        return models_dir / ".kld-bases" / f"{tag}-{self.sha256[:16]}-{self.tokens_sha256[:16]}-{self.first}.npz"


def check_size(windows: int, positions: int, vocab: int) -> None:
    size = windows * positions * vocab * 2
    if size > MAX_BASE_BYTES:
        raise WorkloadError(
            f"the KL-divergence base would take {size / 2**30:.1f} GiB ({windows} windows x "
            f"{positions} scored positions x {vocab} vocabulary x 2 bytes), over "
            f"{MAX_BASE_BYTES / 2**30:.0f} GiB: ask for fewer windows"
        )


def load(key: BaseKey, models_dir: Path) -> list[BaseRows] | None:
    path = key.path(models_dir)
    if not path.exists():
        return None
    with np.load(path) as z:
        return [BaseRows(s, m, q) for s, m, q in zip(z["scale"], z["min_log_prob"], z["q"], strict=True)]


def save(key: BaseKey, models_dir: Path, windows: list[BaseRows]) -> Path:
    path = key.path(models_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:  # np.savez would add .npz to a name without it
        np.savez(
            f,
            scale=np.stack([w.scale for w in windows]),
            min_log_prob=np.stack([w.min_log_prob for w in windows]),
            q=np.stack([w.q for w in windows]),
        )
    os.replace(tmp, path)
    return path
