"""Writing one llama model's weights in each engine's format: HF/MLX directory, GGUF, quantized forms.

Weights are passed around as ``{hf_name: float32 ndarray}`` in Hugging Face layout (``[out, in]``,
q/k rows in HF order). GGUF wants llama.cpp's q/k row order, so `write_gguf` permutes exactly as
llama.cpp's ``convert_hf_to_gguf.py`` does and `unpermute_qk` undoes it when reading a GGUF back.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from siliconbench.contract.errors import EngineError, UserError
from siliconbench.contract.manifest import Artifact, sha256_path, size_path

from siliconbench.worker.models.make.tokenizer import BpeVocab

# HF tensor name -> GGUF tensor name ({i} is the layer index).
HF_TO_GGUF = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
    "model.layers.{i}.input_layernorm.weight": "blk.{i}.attn_norm.weight",
    "model.layers.{i}.self_attn.q_proj.weight": "blk.{i}.attn_q.weight",
    "model.layers.{i}.self_attn.k_proj.weight": "blk.{i}.attn_k.weight",
    "model.layers.{i}.self_attn.v_proj.weight": "blk.{i}.attn_v.weight",
    "model.layers.{i}.self_attn.o_proj.weight": "blk.{i}.attn_output.weight",
    "model.layers.{i}.post_attention_layernorm.weight": "blk.{i}.ffn_norm.weight",
    "model.layers.{i}.mlp.gate_proj.weight": "blk.{i}.ffn_gate.weight",
    "model.layers.{i}.mlp.up_proj.weight": "blk.{i}.ffn_up.weight",
    "model.layers.{i}.mlp.down_proj.weight": "blk.{i}.ffn_down.weight",
    # Qwen2's attention biases and Qwen3's per-head q/k norms (llama.cpp's qwen2 / qwen3 tensor names)
    "model.layers.{i}.self_attn.q_proj.bias": "blk.{i}.attn_q.bias",
    "model.layers.{i}.self_attn.k_proj.bias": "blk.{i}.attn_k.bias",
    "model.layers.{i}.self_attn.v_proj.bias": "blk.{i}.attn_v.bias",
    "model.layers.{i}.self_attn.q_norm.weight": "blk.{i}.attn_q_norm.weight",
    "model.layers.{i}.self_attn.k_norm.weight": "blk.{i}.attn_k_norm.weight",
    # a mixture of experts (llama.cpp's qwen3moe names): the router, and each projection's experts stacked
    "model.layers.{i}.mlp.gate.weight": "blk.{i}.ffn_gate_inp.weight",
    "model.layers.{i}.mlp.experts.gate_proj.weight": "blk.{i}.ffn_gate_exps.weight",
    "model.layers.{i}.mlp.experts.up_proj.weight": "blk.{i}.ffn_up_exps.weight",
    "model.layers.{i}.mlp.experts.down_proj.weight": "blk.{i}.ffn_down_exps.weight",
}
# llama.cpp's llama architecture applies RoPE to adjacent pairs, so HF's q/k rows are permuted for it (as
# convert_hf_to_gguf's LlamaModel does); its qwen2/qwen3 use NeoX RoPE, HF's own order: no permutation.
PERMUTES_QK = {"llama": True, "qwen2": False, "qwen3": False, "qwen3moe": False}
GGUF_TO_HF = {v: k for k, v in HF_TO_GGUF.items()}
_LAYER = re.compile(r"^(model\.layers|blk)\.(\d+)\.")


def _rename(name: str, table: dict[str, str]) -> str:
    m = _LAYER.match(name)
    key = name if m is None else name.replace(f".{m.group(2)}.", ".{i}.", 1)
    if key not in table:
        raise KeyError(f"no mapping for tensor {name!r}")
    return table[key] if m is None else table[key].replace("{i}", m.group(2))


def hf_name(gguf_name: str) -> str:
    return _rename(gguf_name, GGUF_TO_HF)


def gguf_name(hf: str) -> str:
    return _rename(hf, HF_TO_GGUF)


def permute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF -> llama.cpp row order: HF rotates (first half, second half) pairs, ggml adjacent pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def count_params(weights: dict[str, np.ndarray]) -> int:
    return int(sum(w.size for w in weights.values()))


# Weight dtype -> the HF config's torch_dtype.
HF_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def to_bf16_bits(w: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), rounded to nearest even, as torch and MLX round."""
    u = np.ascontiguousarray(w, dtype=np.float32).view(np.uint32)
    return ((u + (0x7FFF + ((u >> 16) & 1))) >> 16).astype(np.uint16)


def _save_safetensors(tensors: dict[str, np.ndarray], path: Path, dtype: str) -> None:
    """Every tensor in ``dtype`` (f32, f16, bf16), norms included, as an HF checkpoint of that dtype is.

    numpy has no bfloat16: bf16 tensors go to safetensors as uint16 bit patterns tagged BF16.
    """
    from safetensors import TensorSpec, serialize_file  # an engine's own package: optional, needed by that format only

    arrays = {}
    for k, v in tensors.items():
        if dtype == "bf16":
            arrays[k] = ("bfloat16", to_bf16_bits(v))
        else:
            a = np.ascontiguousarray(v, dtype=np.float32 if dtype == "f32" else np.float16)
            arrays[k] = (a.dtype.name, a)
    specs = {
        k: TensorSpec(dtype=name, shape=a.shape, data_ptr=a.ctypes.data, data_len=a.nbytes)
        for k, (name, a) in arrays.items()
    }
    serialize_file(specs, str(path), metadata={"format": "pt"})  # arrays stay referenced until written


def write_hf_dir(
    out_dir: Path, config: dict, weights: dict[str, np.ndarray], vocab: BpeVocab, dtype: str = "f32"
) -> None:
    """An HF ``LlamaForCausalLM`` directory with every tensor in ``dtype`` (f32, f16 or bf16), which mlx-lm
    loads as is and computes in (its activations and KV cache take the weights' dtype)."""
    if dtype not in HF_DTYPES:
        raise ValueError(f"dtype {dtype!r}: one of {', '.join(HF_DTYPES)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    config = {**config, "torch_dtype": HF_DTYPES[dtype]}
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    gen = {"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"], "do_sample": False}
    (out_dir / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    st = out_dir / "model.safetensors"
    _save_safetensors(weights, st, dtype)
    st.chmod(0o644)  # safetensors creates it 0600; a worker running as another user must read it
    vocab.write_hf(out_dir, model_max_length=config["max_position_embeddings"])


@dataclass(frozen=True)
class Deferred:
    """A tensor read only when the GGUF writer reaches it (float32, HF layout), so a conversion holds one at a time;
    ``read_stored`` gives its values as stored (``stored``: f32, f16 or bf16 as uint16 bits), which a GGUF of that
    dtype takes without a float32 round trip."""

    shape: tuple[int, ...]
    read: Callable[[], np.ndarray]
    stored: str | None = None
    read_stored: Callable[[], np.ndarray] | None = None


class _Pending:
    """What gguf's writer holds in place of an array until it writes: the output's shape, dtype and size up front, its
    bytes made in ``tofile`` and dropped after (the writer calls nothing else of a tensor on a little-endian host)."""

    def __init__(self, shape: tuple[int, ...], dtype, make: Callable[[], np.ndarray]) -> None:
        self.shape, self.dtype, self._make = shape, np.dtype(dtype), make
        self.nbytes = int(np.prod(shape, dtype=np.int64)) * self.dtype.itemsize

    def tofile(self, fout) -> None:
        a = self._make()
        if a.nbytes != self.nbytes or a.dtype != self.dtype:
            raise ValueError(
                f"a tensor of {a.nbytes} bytes ({a.dtype}) where {self.nbytes} ({self.dtype}) were announced"
            )
        a.tofile(fout)


def write_gguf(
    path: Path,
    config: dict,
    weights: dict[str, np.ndarray],
    vocab: BpeVocab,
    *,
    name: str,
    dtype: str = "f16",
    arch: str = "llama",
) -> None:
    """A GGUF F16 (``dtype`` f16), BF16 (bf16) or F32 (f32) file of llama.cpp architecture ``arch`` (llama, qwen2,
    qwen3, qwen3moe with its experts stacked: moe.stack_experts); 1-D tensors (norms, biases) stay F32, as llama.cpp
    requires. Each tensor is converted only as it is written (a ``Deferred`` one read then too), so the writer holds
    one converted tensor at a time, not a copy of the model."""
    import gguf  # an engine's own package: optional, needed by that format only

    if dtype not in ("f16", "f32", "bf16"):
        raise ValueError(f"dtype {dtype!r}: f16, bf16 or f32")
    matrix = np.float16 if dtype == "f16" else np.float32
    file_type = {
        "f16": gguf.LlamaFileType.MOSTLY_F16,
        "bf16": gguf.LlamaFileType.MOSTLY_BF16,
        "f32": gguf.LlamaFileType.ALL_F32,
    }[dtype]

    path.parent.mkdir(parents=True, exist_ok=True)
    n_head, n_kv = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // n_head
    permute = PERMUTES_QK[arch]
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(name)
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(config["hidden_size"])
    w.add_block_count(config["num_hidden_layers"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_dimension_count(head_dim)
    if head_dim != config["hidden_size"] // n_head:  # a head size of its own, as convert_hf_to_gguf writes it
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_rope_freq_base(float(config["rope_theta"]))
    w.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    w.add_vocab_size(config["vocab_size"])
    if config.get("num_experts"):  # a mixture of experts, as convert_hf_to_gguf writes Qwen3-MoE's
        w.add_expert_count(config["num_experts"])
        w.add_expert_used_count(config["num_experts_per_tok"])
        w.add_expert_feed_forward_length(config["moe_intermediate_size"])
    w.add_file_type(file_type)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    vocab.add_to_gguf(w)
    for key, t in weights.items():
        shape = tuple(t.shape)
        heads = n_head if key.endswith("q_proj.weight") else n_kv if key.endswith("k_proj.weight") else 0
        ndim = len(shape)

        def make(t=t, heads=heads, ndim=ndim) -> np.ndarray:
            target = dtype if ndim > 1 else "f32"
            if isinstance(t, Deferred) and t.stored == target and t.read_stored is not None:
                a = t.read_stored()  # already the dtype written (bf16 as its bits): no float32 copy
                return np.ascontiguousarray(permute_qk(a, heads) if permute and heads else a)
            a = t.read() if isinstance(t, Deferred) else t
            if permute and heads:
                a = permute_qk(a, heads)
            if dtype == "bf16" and ndim > 1:  # numpy has no bfloat16: the bit patterns, tagged BF16
                return to_bf16_bits(a)
            return np.ascontiguousarray(a, dtype=np.float32 if ndim == 1 else matrix)

        if dtype == "bf16" and len(shape) > 1:
            pending = _Pending(shape, np.uint16, make)
            w.add_tensor(gguf_name(key), pending, raw_shape=shape, raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            w.add_tensor(gguf_name(key), _Pending(shape, np.float32 if len(shape) == 1 else matrix, make))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize_gguf(src: Path, dst: Path, quant: str) -> None:
    """Quantize with llama.cpp's own quantizer through llama-cpp-python (no extra binary)."""
    import llama_cpp  # an engine's own package: optional, needed by that format only
    from llama_cpp import _logger  # an engine's own package: optional, needed by that format only

    ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{quant}")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = 0  # all cores
    level = _logger.logger.level
    _logger.set_verbose(False)  # llama.cpp logs every tensor otherwise
    try:
        rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), params)
    finally:
        _logger.logger.setLevel(level)
    if rc != 0 or not dst.is_file():
        raise EngineError(f"llama_model_quantize {src.name} -> {quant} failed with status {rc}")


def convert_mlx(
    src_dir: Path,
    dst_dir: Path,
    bits: int,
    group_size: int = 64,
    quant_predicate: str | None = None,
    dtype: str = "float32",
) -> None:
    """mlx-lm affine quantization (or one of its mixed recipes, ``bits`` then its low width); float32 scales
    and norms by default because f16 math is slow on MLX's CPU (a GPU's model takes bfloat16, as published)."""
    from mlx_lm import convert  # an engine's own package: optional, needed by that format only

    with contextlib.redirect_stdout(io.StringIO()):  # mlx-lm prints [INFO] lines
        convert(
            str(src_dir),
            str(dst_dir),
            quantize=True,
            q_bits=bits,
            q_group_size=group_size,
            dtype=dtype,
            quant_predicate=quant_predicate,
        )


def artifact(model_dir: Path, rel: str, fmt: str, quant: str, level: str) -> Artifact:
    p = model_dir / rel
    return Artifact(format=fmt, quant=quant, level=level, path=rel, size_bytes=size_path(p), sha256=sha256_path(p))


@contextlib.contextmanager
def staged_model_dir(models_dir: Path, name: str, *, overwrite: bool) -> Iterator[Path]:
    """Build a model in a hidden sibling folder and move it into place only when complete.

    A half-written model never carries a manifest.json under its real name, so the catalog
    (which globs ``*/manifest.json``) cannot pick it up after a crash.
    """
    models_dir = Path(models_dir).expanduser()
    final = models_dir / name
    if final.exists() and not overwrite:
        raise UserError("name", f"model folder {final} already exists; rebuild it with --force.")
    stage = models_dir / f".{name}.partial-{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    try:
        yield stage
        for f in stage.rglob("*"):  # on disk before it has its name: durable, and its pages clean (evictable)
            if f.is_file():
                fd = os.open(f, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        if final.exists():
            shutil.rmtree(final)
        stage.rename(final)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
