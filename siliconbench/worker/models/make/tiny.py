"""`make_tiny`: a seeded random llama model, written for both engines in every weight dtype and two quantizations.

Nothing is downloaded: the tokenizer is trained on the shipped corpus and the weights are seeded
numpy draws. The weights say nothing about language (generation is gibberish); they exist so that
both engines run the same architecture, the same shapes and the same numbers.

Level ``full`` comes in three weight dtypes so that a pair compares engines, not dtypes: GGUF F16 with
MLX f16 (what a Mac runs), GGUF F32 with MLX f32 (what the MLX CPU build needs), and MLX bf16. The
matrices are float16-representable, so F16, F32, f16 and f32 hold exactly the same numbers; bf16 rounds
them to 8 mantissa bits.

Determinism: the same arguments give byte-identical ``model.safetensors``, tokenizer files and GGUF
F16/F32 files (nothing in them depends on time or machine). The Q8_0 / Q4_K_M files and MLX quantized
directories come out of llama.cpp's and MLX's quantizers; they were identical in our runs, but that is
the quantizers' property, not ours: compare the F16 / f32 digests to decide "same model".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import ModelManifest, write_manifest

from siliconbench.worker.models.make import formats
from siliconbench.worker.models.make.tokenizer import BpeVocab

INIT_STD = 0.02  # GPT-2/Llama init: logits of a random model stay around +-1, not in the hundreds
RMS_NORM_EPS = 1e-5
ROPE_THETA = 10000.0
# k-quants (Q4_K, Q6_K) need rows that are multiples of 256; other widths silently fall back to
# Q5_0/Q8_0 inside a "Q4_K_M" file, so the default FFN width is rounded up to 256.
KQUANT_ROW = 256


def default_intermediate_size(hidden_size: int) -> int:
    """Llama's 8/3 * hidden, rounded up to a multiple of 256 (512 -> 1536, 256 -> 768, 128 -> 512)."""
    return math.ceil(8 * hidden_size / 3 / KQUANT_ROW) * KQUANT_ROW


def tiny_config(
    *,
    hidden_size: int,
    n_layers: int,
    n_heads: int,
    n_kv_heads: int,
    intermediate_size: int,
    vocab: BpeVocab,
    n_ctx: int,
    head_dim: int | None = None,
) -> dict:
    """The HF ``config.json`` of a tiny model (untied lm_head, as in Llama 2/3). ``head_dim`` other than
    hidden_size / n_heads declares its own head size, as Qwen3 and Gemma do (attention width n_heads x head_dim)."""
    if head_dim is None and hidden_size % n_heads:
        raise UserError("hidden_size", f"hidden_size {hidden_size} must split into {n_heads} heads.")
    head_dim = head_dim or hidden_size // n_heads
    if head_dim % 2 or n_heads % n_kv_heads:
        raise UserError(
            "hidden_size",
            f"heads of size {head_dim} must be even, and n_heads {n_heads} must split into n_kv_heads {n_kv_heads} "
            "groups.",
        )
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden_size,
        "intermediate_size": intermediate_size,
        "num_hidden_layers": n_layers,
        "num_attention_heads": n_heads,
        "num_key_value_heads": n_kv_heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": n_ctx,
        "rms_norm_eps": RMS_NORM_EPS,
        "rope_theta": ROPE_THETA,
        "vocab_size": len(vocab),
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": vocab.bos_id,
        "eos_token_id": vocab.eos_id,
        "torch_dtype": "float32",
    }


def init_weights(config: dict, seed: int) -> dict[str, np.ndarray]:
    """Seeded N(0, 0.02) matrices and unit norms, in a fixed order, in HF names and layout."""
    rng = np.random.default_rng(seed)

    def mat(rows: int, cols: int) -> np.ndarray:
        # Rounded to float16-representable values so the F16 GGUF holds exactly these weights.
        w = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(INIT_STD)
        return w.astype(np.float16).astype(np.float32)

    return llama_weights(config, mat)


def llama_weights(config: dict, mat: Callable[[int, int], np.ndarray]) -> dict[str, np.ndarray]:
    """Every tensor of a llama model in HF names and layout, in a fixed order: matrices from ``mat(rows, cols)``,
    norms 1."""
    h, f, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    kv = config["num_key_value_heads"] * config["head_dim"]
    q = config["num_attention_heads"] * config["head_dim"]
    weights = {"model.embed_tokens.weight": mat(v, h)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        weights[p + "input_layernorm.weight"] = np.ones(h, np.float32)
        weights[p + "self_attn.q_proj.weight"] = mat(q, h)
        weights[p + "self_attn.k_proj.weight"] = mat(kv, h)
        weights[p + "self_attn.v_proj.weight"] = mat(kv, h)
        weights[p + "self_attn.o_proj.weight"] = mat(h, q)
        weights[p + "post_attention_layernorm.weight"] = np.ones(h, np.float32)
        weights[p + "mlp.gate_proj.weight"] = mat(f, h)
        weights[p + "mlp.up_proj.weight"] = mat(f, h)
        weights[p + "mlp.down_proj.weight"] = mat(h, f)
    weights["model.norm.weight"] = np.ones(h, np.float32)
    weights["lm_head.weight"] = mat(v, h)
    return weights


def make_tiny(
    models_dir: Path,
    *,
    name: str = "tiny-llama-30m",
    seed: int = 0,
    hidden_size: int = 512,
    n_layers: int = 8,
    n_heads: int = 8,
    n_kv_heads: int = 4,
    intermediate_size: int | None = None,
    vocab_size: int = 4096,
    n_ctx: int = 4096,
    head_dim: int | None = None,
    overwrite: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ModelManifest:
    """Write ``<models_dir>/<name>/`` (GGUF F16/F32/Q8_0/Q4_K_M, MLX f32/f16/bf16/8bit/4bit) and return its manifest."""
    say = progress or (lambda _msg: None)
    say(f"training a {vocab_size}-token BPE tokenizer on the shipped corpus")
    vocab = BpeVocab.train(vocab_size)
    config = tiny_config(
        hidden_size=hidden_size,
        n_layers=n_layers,
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        intermediate_size=intermediate_size or default_intermediate_size(hidden_size),
        vocab=vocab,
        n_ctx=n_ctx,
        head_dim=head_dim,
    )
    weights = init_weights(config, seed)
    params = formats.count_params(weights)
    with formats.staged_model_dir(models_dir, name, overwrite=overwrite) as d:
        for dtype in ("f32", "f16", "bf16"):
            say(f"writing {params:,} weights as an MLX/HF directory in {dtype}")
            formats.write_hf_dir(d / f"mlx-{dtype}", config, weights, vocab, dtype=dtype)
        f16 = d / "gguf" / f"{name}-F16.gguf"
        for dtype in ("f16", "f32"):
            say(f"writing GGUF {dtype.upper()}")
            formats.write_gguf(
                d / "gguf" / f"{name}-{dtype.upper()}.gguf", config, weights, vocab, name=name, dtype=dtype
            )
        del weights
        for quant in ("Q8_0", "Q4_K_M"):
            say(f"quantizing GGUF {quant} with llama.cpp")
            formats.quantize_gguf(f16, d / "gguf" / f"{name}-{quant}.gguf", quant)
        for bits in (8, 4):
            say(f"quantizing MLX {bits}-bit with mlx-lm")
            formats.convert_mlx(d / "mlx-f32", d / f"mlx-{bits}bit", bits)
        arts = [
            # Within a format, the first "full" is what artifact_for(engine, "full") gives without a dtype
            # (F16 and f32, as before these dtypes existed); sweeps choose through ModelManifest.full_pair.
            formats.artifact(d, f"gguf/{name}-F16.gguf", "gguf", "F16", "full"),
            formats.artifact(d, f"gguf/{name}-F32.gguf", "gguf", "F32", "full"),
            formats.artifact(d, f"gguf/{name}-Q8_0.gguf", "gguf", "Q8_0", "q8"),
            formats.artifact(d, f"gguf/{name}-Q4_K_M.gguf", "gguf", "Q4_K_M", "q4"),
            formats.artifact(d, "mlx-f32", "mlx", "f32", "full"),
            formats.artifact(d, "mlx-f16", "mlx", "f16", "full"),
            formats.artifact(d, "mlx-bf16", "mlx", "bf16", "full"),
            formats.artifact(d, "mlx-8bit", "mlx", "8bit", "q8"),
            formats.artifact(d, "mlx-4bit", "mlx", "4bit", "q4"),
        ]
        manifest = ModelManifest(
            name=name,
            params=params,
            n_ctx=n_ctx,
            hidden_size=hidden_size,
            n_layers=n_layers,
            n_heads=n_heads,
            n_kv_heads=n_kv_heads,
            head_dim=config["head_dim"],
            vocab_size=len(vocab),
            source=f"make-tiny seed={seed}",
            artifacts=arts,
        )
        write_manifest(d, manifest)
    say(f"wrote {Path(models_dir) / name}")
    return manifest
