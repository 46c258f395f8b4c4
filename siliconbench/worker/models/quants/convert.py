"""An unquantized Hugging Face checkpoint (Llama, Mistral, Qwen2, Qwen3) written as a GGUF of the same dtype, without
torch.

llama.cpp's own ``convert_hf_to_gguf.py`` is the reference, but it imports torch, which on Linux comes from the
package index only as a multi-gigabyte CUDA build. The project already writes llama GGUF from numpy weights
(`formats.write_gguf`: llama.cpp's q/k permutation, tokenizer metadata), so the checkpoint's safetensors are
read into numpy here and written by that one writer: Llama and Mistral with llama.cpp's q/k permutation, Qwen2
(attention biases) and Qwen3 (per-head q/k norms, its own head size) without it, as convert_hf_to_gguf writes them.
What it cannot write exactly (rope scaling, sliding windows, other biases, a sentencepiece or unknown
pre-tokenizer) is refused, naming the reference converter.

Tensor by tensor: the headers are read first, each tensor is read, converted and written when the GGUF writer
reaches it, and dropped, so the peak is about the largest tensor (benchmarks/convert_memory.py); a checkpoint whose
largest tensor could not be converted in the memory available is refused before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import psutil

from siliconbench.contract.errors import UserError

from siliconbench.worker.models.facts import safetensors_header
from siliconbench.worker.models.make import formats
from siliconbench.worker.models.make.tokenizer import BpeVocab

# HF model_type -> llama.cpp architecture this converter writes exactly (convert_hf_to_gguf writes Mistral as llama)
ARCH = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}
CONVERTIBLE = tuple(ARCH)
GGUF_DTYPE = {"F32": "f32", "F16": "f16", "BF16": "bf16"}


SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}
# Converting one tensor holds its bytes as read, as float32 and as written, with numpy's temporaries: 10 bytes an
# element bounds it (a tensor kept in its own dtype, the common case, holds 2-3).
BYTES_PER_ELEMENT_HELD = 10


def _deferred(path: Path, offset: int, shape: list[int], dtype: str) -> formats.Deferred:
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1

    def stored() -> np.ndarray:
        # read into a buffer of its own (not a memory map, whose touched pages would stay resident to the end)
        return np.fromfile(path, dtype=SAFETENSORS_DTYPES[dtype], count=count, offset=offset).reshape(shape)

    def as_float32() -> np.ndarray:
        raw = stored()
        if dtype != "BF16":
            return raw.astype(np.float32, copy=False)
        w = raw.astype(np.uint32)
        w <<= 16  # in place: one float32-sized buffer
        return w.view(np.float32)

    return formats.Deferred(tuple(shape), as_float32, GGUF_DTYPE[dtype], stored)


def read_safetensors(folder: Path) -> tuple[dict[str, formats.Deferred], str]:
    """Each weight by HF name, to be read as float32 when it is written, and the checkpoint's dtype (f32, f16, bf16):
    only the headers are read here."""
    weights: dict[str, formats.Deferred] = {}
    dtypes: set[str] = set()
    for path in sorted(folder.glob("model*.safetensors")):
        header = safetensors_header(path)
        with path.open("rb") as f:
            base = 8 + int.from_bytes(f.read(8), "little")  # tensors start after the length and the header
        for name, t in header.items():
            if name == "__metadata__":
                continue
            if t["dtype"] not in SAFETENSORS_DTYPES:
                raise UserError(
                    "--convert",
                    f"{path.name}: tensor {name} is {t['dtype']}; only an unquantized "
                    "(F32, F16, BF16) checkpoint converts.",
                )
            start, _end = t["data_offsets"]
            if t["shape"] and len(t["shape"]) > 1 or name.endswith("embed_tokens.weight"):
                dtypes.add(t["dtype"])
            weights[name] = _deferred(path, base + start, t["shape"], t["dtype"])
    if len(dtypes) != 1:
        raise UserError("--convert", f"{folder}: weights of dtypes {sorted(dtypes)}; one of F32, F16, BF16 expected.")
    return weights, GGUF_DTYPE[dtypes.pop()]


def check_memory(folder: Path, weights: dict[str, formats.Deferred]) -> None:
    """Refuse, before anything is written, a checkpoint whose largest tensor cannot be converted in the memory
    available here (its bytes as read, as float32 and as written, held at once)."""
    name, t = max(weights.items(), key=lambda kv: int(np.prod(kv[1].shape, dtype=np.int64)))
    need = BYTES_PER_ELEMENT_HELD * int(np.prod(t.shape, dtype=np.int64))
    available = psutil.virtual_memory().available
    if need > available:
        raise UserError(
            "--convert",
            f"{folder}: its largest tensor, {name} {list(t.shape)}, needs about {need / 2**30:,.1f} GiB to convert and "
            f"{available / 2**30:,.1f} GiB are available here: convert it with llama.cpp's convert_hf_to_gguf.py on a "
            "larger machine and add the GGUF.",
        )


def convert_to_gguf(folder: Path, out: Path, *, name: str) -> Path:
    config = json.loads((folder / "config.json").read_text())
    if config.get("model_type") not in CONVERTIBLE:
        raise UserError(
            "--convert",
            f"{folder}: model_type {config.get('model_type')!r}; this converter writes "
            f"{', '.join(CONVERTIBLE)} only: convert with llama.cpp's convert_hf_to_gguf.py and add the GGUF.",
        )
    for key in ("rope_scaling", "attention_bias", "mlp_bias", "use_sliding_window"):
        if config.get(key):
            raise UserError(
                "--convert",
                f"{folder}: {key} is set; this converter does not write it: convert with "
                "llama.cpp's convert_hf_to_gguf.py and add the GGUF.",
            )
    weights, dtype = read_safetensors(folder)
    check_memory(folder, weights)
    vocab = BpeVocab.from_hf_dir(folder)
    for k in weights:
        try:
            formats.gguf_name(k)
        except KeyError as exc:
            raise UserError(
                "--convert", f"{folder}: tensor {k} has no llama.cpp name; convert with convert_hf_to_gguf.py."
            ) from exc
    if config.get("tie_word_embeddings"):
        weights.pop("lm_head.weight", None)  # llama.cpp reuses token_embd where output.weight is absent
    config.setdefault("num_key_value_heads", config["num_attention_heads"])
    config.setdefault("rope_theta", 10000.0)
    formats.write_gguf(out, config, weights, vocab, name=name, dtype=dtype, arch=ARCH[config["model_type"]])
    return out
