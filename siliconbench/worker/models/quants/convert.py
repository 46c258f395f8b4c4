"""An unquantized Hugging Face checkpoint (Llama, Mistral, Qwen2, Qwen3) written as a GGUF of the same dtype, without
torch.

llama.cpp's own ``convert_hf_to_gguf.py`` is the reference, but it imports torch, which on Linux comes from the
package index only as a multi-gigabyte CUDA build. The project already writes llama GGUF from numpy weights
(`formats.write_gguf`: llama.cpp's q/k permutation, tokenizer metadata), so the checkpoint's safetensors are
read into numpy here and written by that one writer: Llama and Mistral with llama.cpp's q/k permutation, Qwen2
(attention biases) and Qwen3 (per-head q/k norms, its own head size) without it, as convert_hf_to_gguf writes them.
What it cannot write exactly (rope scaling, sliding windows, other biases, a sentencepiece or unknown
pre-tokenizer) is refused, naming the reference converter.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from siliconbench.contract.errors import UserError

from siliconbench.worker.models.facts import safetensors_header
from siliconbench.worker.models.make import formats
from siliconbench.worker.models.make.tokenizer import BpeVocab

# HF model_type -> llama.cpp architecture this converter writes exactly (convert_hf_to_gguf writes Mistral as llama)
ARCH = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}
CONVERTIBLE = tuple(ARCH)
GGUF_DTYPE = {"F32": "f32", "F16": "f16", "BF16": "bf16"}


def read_safetensors(folder: Path) -> tuple[dict[str, np.ndarray], str]:
    """float32 weights by HF name, and the checkpoint's dtype (f32, f16 or bf16)."""
    weights: dict[str, np.ndarray] = {}
    dtypes: set[str] = set()
    for path in sorted(folder.glob("model*.safetensors")):
        header = safetensors_header(path)
        with path.open("rb") as f:
            base = 8 + int.from_bytes(f.read(8), "little")  # tensors start after the length and the header
        raw = np.memmap(path, dtype=np.uint8, mode="r")
        for name, t in header.items():
            if name == "__metadata__":
                continue
            start, end = t["data_offsets"]
            buf = raw[base + start : base + end]
            if t["dtype"] == "BF16":
                w = (buf.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
            elif t["dtype"] in ("F16", "F32"):
                w = buf.view(np.float16 if t["dtype"] == "F16" else np.float32).astype(np.float32)
            else:
                raise UserError(
                    "--convert",
                    f"{path.name}: tensor {name} is {t['dtype']}; only an unquantized "
                    "(F32, F16, BF16) checkpoint converts.",
                )
            if t["shape"] and len(t["shape"]) > 1 or name.endswith("embed_tokens.weight"):
                dtypes.add(t["dtype"])
            weights[name] = w.reshape(t["shape"])
    if len(dtypes) != 1:
        raise UserError("--convert", f"{folder}: weights of dtypes {sorted(dtypes)}; one of F32, F16, BF16 expected.")
    return weights, GGUF_DTYPE[dtypes.pop()]


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
    vocab = BpeVocab.from_hf_dir(folder)
    weights, dtype = read_safetensors(folder)
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
