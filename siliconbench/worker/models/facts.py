"""What a model's files say about it: shape, vocabulary, context and exact quantization, never the user.

A GGUF file (or split set) is read with the `gguf` package's reader: its ``general.*`` and ``<arch>.*`` keys, its
tokenizer list and every tensor's type. An MLX or Hugging Face directory is read from ``config.json`` and the
headers of its ``*.safetensors`` files (8-byte length, JSON): no weights are loaded for either.
"""

from __future__ import annotations

import json
import re
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import level_of

from siliconbench.worker.models.architectures import llama_cpp_arch

SPLIT = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
# The files mlx-lm's loader reads from a model folder (mlx_lm.utils: its snapshot_download allow-list).
MLX_PATTERNS = (
    "*.json",
    "model*.safetensors",
    "*.py",
    "tokenizer.model",
    "*.tiktoken",
    "tiktoken.model",
    "*.txt",
    "*.jsonl",
    "*.jinja",
)
# config.json keys of the expert counts, by the families that use them (Mixtral, Qwen-MoE, DeepSeek, gpt-oss ...)
EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
EXPERT_USED_KEYS = ("num_experts_per_tok", "num_experts_per_token", "experts_per_token", "moe_topk")
# safetensors dtype -> our weight dtype names
ST_FLOAT = {"F32": "f32", "F16": "f16", "BF16": "bf16"}


@dataclass
class FormFacts:
    """One form of a model, as its files describe it."""

    format: str  # gguf | mlx
    architecture: str
    params: int
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    vocab_size: int
    n_ctx: int
    quant: str
    level: str
    files: list[str]  # relative to ``base``
    base: Path  # the folder the files are in (a GGUF's folder, or the model directory)
    details: dict = field(default_factory=dict)
    head_dim: int | None = None  # as declared (GGUF key_length, HF head_dim); None: the files declare none
    n_experts: int = 0  # a mixture of experts' routed experts (0: dense)
    n_experts_used: int = 0  # experts each token is routed to
    kv_lora_rank: int | None = None  # multi-head latent attention (DeepSeek): the compressed KV's rank

    @property
    def head_size(self) -> int:
        return self.head_dim or (self.hidden_size // self.n_heads if self.n_heads else 0)

    @property
    def family(self) -> str:
        """The architecture under llama.cpp's name (architectures.LLAMA_CPP_ARCH): informational, not identity."""
        return llama_cpp_arch(self.architecture)

    def shape(self) -> dict:
        """What identifies the network whichever engine's form it is in. Multi-head latent attention stores K and V
        differently in the two forms (llama.cpp's MLA GGUFs: one KV head of kv_lora_rank + rope size), so there the
        latent rank stands for the KV heads and head size."""
        return network_shape(self)


SHAPE_FIELDS = ("n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_size", "vocab_size")
EXPERT_FIELDS = ("n_experts", "n_experts_used")


def network_shape(m) -> dict:
    """The identifying shape of a form's facts or of a recorded manifest (both carry these fields); an expert count a
    manifest predates (None) is left out, and latent attention's rank replaces the KV heads and head size."""
    shape = {k: getattr(m, k) for k in SHAPE_FIELDS + EXPERT_FIELDS if getattr(m, k) is not None}
    if m.kv_lora_rank:
        del shape["n_kv_heads"], shape["head_size"]
        shape["kv_lora_rank"] = m.kv_lora_rank
    return shape


def split_parts(first: Path) -> list[Path]:
    """A GGUF and, where its name says ``-00001-of-0000N``, the other parts beside it (all of them present)."""
    m = SPLIT.match(first.name)
    if not m:
        return [first]
    if int(m["no"]) != 1:
        raise UserError(
            "source",
            f"{first} is part {int(m['no'])} of a split GGUF: give its first part, "
            f"{m['stem']}-00001-of-{m['count']}.gguf.",
        )
    count = int(m["count"])
    parts = [first.with_name(f"{m['stem']}-{i:05d}-of-{m['count']}.gguf") for i in range(1, count + 1)]
    missing = [p.name for p in parts if not p.is_file()]
    if missing:
        raise UserError(
            "source", f"split GGUF {first.name} has {count} parts; missing beside it: {', '.join(missing)}."
        )
    return parts


# GGUF metadata value types (ggml/include/gguf.h): struct format of the scalar ones; 8 string, 9 array
_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_SMALL_ARRAY = 256  # arrays longer than this (token lists, merges) are kept as their length only


@dataclass
class GgufHeader:
    kv: dict  # key -> value; a long array -> ("array", length)
    tensors: list[tuple[str, tuple[int, ...], int]]  # name, shape (ggml order), ggml type id


def read_gguf_header(path: Path) -> GgufHeader:
    """A GGUF's metadata and tensor table, read straight from its header (the `gguf` package's reader
    parses every element of every array into numpy: 3.6 s for SmolLM2's 49,152-token vocabulary)."""
    with path.open("rb") as f:

        def unpack(fmt: str):
            return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

        def string() -> str:
            return f.read(unpack("<Q")).decode("utf-8", "replace")

        def value(vtype: int):
            if vtype in _GGUF_SCALARS:
                return unpack(_GGUF_SCALARS[vtype])
            if vtype == 8:
                return string()
            if vtype == 9:
                etype, n = unpack("<I"), unpack("<Q")
                if n <= _SMALL_ARRAY:
                    return [value(etype) for _ in range(n)]
                if etype in _GGUF_SCALARS:
                    f.seek(n * struct.calcsize(_GGUF_SCALARS[etype]), 1)
                else:
                    for _ in range(n):
                        value(etype)
                return ("array", n)
            raise ValueError(f"unknown GGUF value type {vtype}")

        if f.read(4) != b"GGUF":
            raise UserError("source", f"{path} is not a GGUF file (it does not start with the GGUF magic).")
        try:
            version = unpack("<I")
            if version < 2:
                raise ValueError(f"GGUF version {version} (llama.cpp reads 2 and 3)")
            n_tensors, n_kv = unpack("<Q"), unpack("<Q")
            kv = {}
            for _ in range(n_kv):
                key = string()
                kv[key] = value(unpack("<I"))
            tensors = []
            for _ in range(n_tensors):
                name = string()
                shape = tuple(unpack("<Q") for _ in range(unpack("<I")))
                ttype = unpack("<I")
                unpack("<Q")  # offset
                tensors.append((name, shape, ttype))
        except (struct.error, ValueError, UnicodeDecodeError) as exc:
            raise UserError("source", f"{path} could not be read as GGUF: {exc}") from exc
    return GgufHeader(kv, tensors)


def gguf_facts(first: Path) -> FormFacts:
    import gguf  # an engine's own package (models extra): its tables of architectures and quant types

    parts = split_parts(first)
    headers = [read_gguf_header(p) for p in parts]
    kv = headers[0].kv

    def key(name: str, default=None):
        return kv.get(name, default)

    arch = key("general.architecture")
    if not arch:
        raise UserError("source", f"{first} has no general.architecture: not a model GGUF.")
    if arch not in set(gguf.MODEL_ARCH_NAMES.values()):
        raise UserError(
            "source", f"{first}: architecture {arch!r} is not one llama.cpp (gguf {gguf.__version__}) runs."
        )
    tensors = [t for h in headers for t in h.tensors]
    types, n_elements, n_bytes = Counter(), 0, 0
    for _name, shape, ttype in tensors:
        qtype = gguf.GGMLQuantizationType(ttype)
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        n = 1
        for d in shape:
            n *= d
        types[qtype.name] += 1
        n_elements += n
        n_bytes += n // block * size
    ftype = key("general.file_type")
    quant = _file_type_name(gguf, ftype) if ftype is not None else _majority_type(gguf, tensors)
    tokens = key("tokenizer.ggml.tokens")
    n_tokens = tokens[1] if isinstance(tokens, tuple) else len(tokens or [])
    embd = next((shape for name, shape, _t in tensors if name == "token_embd.weight"), None)
    vocab = int(key(f"{arch}.vocab_size") or (embd[-1] if embd else n_tokens))
    heads = key(f"{arch}.attention.head_count", 0)
    heads = int(max(heads) if isinstance(heads, list) else heads)
    kv_heads = key(f"{arch}.attention.head_count_kv", heads)
    kv_heads = int(max(kv_heads) if isinstance(kv_heads, list) else kv_heads)
    level = level_of(quant)
    if level is None:
        raise UserError("source", f"{first}: quantization {quant} has no level (full, q8 ... q2) to pair it at.")
    return FormFacts(
        format="gguf",
        architecture=arch,
        params=n_elements,
        n_layers=int(key(f"{arch}.block_count", 0)),
        hidden_size=int(key(f"{arch}.embedding_length", 0)),
        n_heads=heads,
        n_kv_heads=kv_heads,
        vocab_size=vocab,
        n_ctx=int(key(f"{arch}.context_length", 0)),
        head_dim=int(key(f"{arch}.attention.key_length")) if key(f"{arch}.attention.key_length") else None,
        n_experts=int(key(f"{arch}.expert_count") or 0),
        n_experts_used=int(key(f"{arch}.expert_used_count") or 0),
        kv_lora_rank=int(key(f"{arch}.attention.kv_lora_rank") or 0) or None,
        quant=quant,
        level=level,
        files=[p.name for p in parts],
        base=first.parent,
        details={
            "file_type": quant,
            "tensor_types": dict(sorted(types.items())),
            "bits_per_weight": round(8 * n_bytes / max(n_elements, 1), 3),
            "split_parts": len(parts),
            "tokenizer": key("tokenizer.ggml.model"),
            "pre_tokenizer": key("tokenizer.ggml.pre"),
        },
    )


def _file_type_name(gguf, ftype: int) -> str:
    try:
        name = gguf.LlamaFileType(int(ftype)).name
    except ValueError:
        return f"ftype{ftype}"
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


def _majority_type(gguf, tensors) -> str:
    matrices = Counter(gguf.GGMLQuantizationType(t).name for _n, shape, t in tensors if len(shape) > 1)
    return matrices.most_common(1)[0][0] if matrices else "F32"


def safetensors_header(path: Path) -> dict:
    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > 100 << 20:
            raise UserError("source", f"{path} has a {n}-byte safetensors header: not a safetensors file.")
        return json.loads(f.read(n))


def hf_facts(folder: Path) -> FormFacts:
    """An MLX or Hugging Face checkpoint directory: config.json and model*.safetensors."""
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise UserError("source", f"{folder} has no config.json: not a Hugging Face or MLX model folder.")
    config = json.loads(config_path.read_text())
    text = config.get("text_config") or {}
    get = lambda k, d=None: config.get(k, text.get(k, d))  # noqa: E731 - multimodal configs nest the LM's keys
    weights = sorted(folder.glob("model*.safetensors"))
    if not weights:
        raise UserError(
            "source",
            f"{folder} has no model*.safetensors (PyTorch .bin checkpoints are not supported: "
            "neither engine reads them without torch).",
        )
    model_type = get("model_type")
    _check_mlx_runs(folder, model_type)
    q = config.get("quantization") or config.get("quantization_config") or {}
    bits, group, mode = q.get("bits"), q.get("group_size"), q.get("mode", "affine")
    overrides = {k: v for k, v in q.items() if isinstance(v, dict)}
    params, n_bytes, dtypes = 0, 0, Counter()
    for w in weights:
        for name, t in safetensors_header(w).items():
            if name == "__metadata__":
                continue
            n = 1
            for d in t["shape"]:
                n *= d
            start, end = t["data_offsets"]
            n_bytes += end - start
            if name.endswith((".scales", ".biases")):
                continue
            if t["dtype"] == "U32" and bits:  # packed quantized weights: 32 / bits values per uint32
                layer_bits = overrides.get(name.removesuffix(".weight"), {}).get("bits", bits)
                n = n * 32 // layer_bits
            else:
                dtypes[t["dtype"]] += n
            params += n
    if bits:
        quant = _mlx_quant_name(bits, group, mode, overrides)
        level = level_of(f"{8 if mode == 'mxfp8' else bits}bit")
    else:
        dtype = ST_FLOAT.get(dtypes.most_common(1)[0][0]) if dtypes else None
        if dtype is None:
            raise UserError("source", f"{folder}: weights of dtype {dict(dtypes)} are neither f32, f16 nor bf16.")
        quant, level = dtype, "full"
    if level is None:
        raise UserError("source", f"{folder}: {bits}-bit weights have no level (full, q8 ... q2) to pair them at.")
    heads = int(get("num_attention_heads", 0))
    files = sorted(str(p.relative_to(folder)) for pat in MLX_PATTERNS for p in folder.glob(pat) if p.is_file())
    return FormFacts(
        format="mlx",
        architecture=model_type or "?",
        params=params,
        n_layers=int(get("num_hidden_layers", 0)),
        hidden_size=int(get("hidden_size", 0)),
        n_heads=heads,
        n_kv_heads=int(get("num_key_value_heads", heads)),
        vocab_size=int(get("vocab_size", 0)),
        n_ctx=int(get("max_position_embeddings", 0)),
        head_dim=int(get("head_dim")) if get("head_dim") else None,
        n_experts=int(next((get(k) for k in EXPERT_COUNT_KEYS if get(k)), 0)),
        n_experts_used=int(next((get(k) for k in EXPERT_USED_KEYS if get(k)), 0)),
        kv_lora_rank=int(get("kv_lora_rank")) if get("kv_lora_rank") else None,
        quant=quant,
        level=level,
        files=files,
        base=folder,
        details={
            "quantization": {"bits": bits, "group_size": group, "mode": mode, "overridden_layers": len(overrides)}
            if bits
            else None,
            "weight_dtype": quant if not bits else None,
            "bits_per_weight": round(8 * n_bytes / max(params, 1), 3),
            "model_type": model_type,
        },
    )


def _mlx_quant_name(bits: int, group: int | None, mode: str, overrides: dict) -> str:
    if mode != "affine":
        return mode  # mxfp4, nvfp4, mxfp8: the mode fixes bits and group size
    high = {v.get("bits") for v in overrides.values()} - {bits, None}
    name = f"mixed_{bits}_{max(high)}" if high else f"{bits}bit"
    return name if group in (64, None) else f"{name}-g{group}"


def _check_mlx_runs(folder: Path, model_type: str | None) -> None:
    """Refuse a model_type mlx-lm has no module for, where mlx-lm is installed here to ask."""
    import importlib.util

    if not model_type:
        raise UserError("source", f"{folder}/config.json has no model_type.")
    try:
        from mlx_lm.utils import MODEL_REMAPPING  # an engine's own package: asked only where it is installed
    except Exception:
        return
    name = MODEL_REMAPPING.get(model_type, model_type)
    if importlib.util.find_spec(f"mlx_lm.models.{name}") is None:
        raise UserError("source", f"{folder}: model_type {model_type!r} is not an architecture mlx-lm runs.")


def form_facts(path: Path) -> FormFacts:
    """A GGUF file or a model directory, whichever ``path`` is."""
    if path.is_dir():
        return hf_facts(path)
    if not path.exists():
        raise UserError("source", f"{path} does not exist.")
    if path.suffix.lower() != ".gguf":
        with path.open("rb") as f:
            if f.read(4) != b"GGUF":
                raise UserError("source", f"{path} is neither a GGUF file nor a model folder.")
    return gguf_facts(path)
