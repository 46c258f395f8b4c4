"""`models make-synthetic --shape llama-3-8b`: a model of a published shape with random weights, for throughput.

Prefill and decode speed, memory and energy depend on a model's shapes and types, not on its weights' values, so
a model of Llama 3 8B's exact shape (layers, heads, KV heads, FFN, vocabulary) measures what Llama 3 8B would,
without a hub. Its weights are a seeded N(0, 0.02) pool tiled over every tensor (drawing 8 billion normals would
take minutes for nothing); its tokenizer is the tiny models' BPE padded to the shape's vocabulary with tokens no
text produces (prompts are synthetic ids anyway). Perplexity and KL-divergence of such a model mean nothing and
are refused at expansion (the manifest says ``synthetic``).

Written on the host that will run it: GGUF F16 and the MLX bf16 folder, quantized by the engines' own quantizers
(Q4_K_M, MLX 4-bit g64 by default); ``--drop-full`` removes the full-precision files afterwards when only the
quantized forms are wanted and the disk is short. A shape whose full precision does not fit the free disk is
refused before anything is written, with the sizes.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import ModelManifest, level_of, write_manifest

from siliconbench.worker.models.make import formats
from siliconbench.worker.models.make.tiny import INIT_STD, RMS_NORM_EPS, llama_weights
from siliconbench.worker.models.make.tokenizer import BpeVocab

# Published shapes (the models' config.json on the Hub), llama architecture. Untied output embeddings for all
# (Llama 3.2 1B ties them: one embedding-sized matrix more here, said in the note). "qwen2.5-32b" is Qwen2.5-32B's
# dimensions on the llama architecture (no QKV biases): a 32B-class shape both engines load as llama.
SHAPES: dict[str, dict] = {
    "llama-3.2-1b": {
        "hidden_size": 2048,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 8192,
        "vocab_size": 128256,
        "rope_theta": 500000.0,
        "max_position_embeddings": 131072,
    },
    "llama-3-8b": {
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "rope_theta": 500000.0,
        "max_position_embeddings": 131072,
    },
    "qwen2.5-32b": {
        "hidden_size": 5120,
        "num_hidden_layers": 64,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "intermediate_size": 27648,
        "vocab_size": 152064,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 32768,
    },
    "llama-3-70b": {
        "hidden_size": 8192,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "intermediate_size": 28672,
        "vocab_size": 128256,
        "rope_theta": 500000.0,
        "max_position_embeddings": 131072,
    },
}
POOL = 1 << 24  # 16M seeded normals, tiled


def shape_config(shape: str, vocab: BpeVocab) -> dict:
    if shape not in SHAPES:
        raise UserError("--shape", f"unknown shape {shape!r}.", sorted(SHAPES))
    s = SHAPES[shape]
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        **s,
        "head_dim": s["hidden_size"] // s["num_attention_heads"],
        "hidden_act": "silu",
        "rms_norm_eps": RMS_NORM_EPS,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": vocab.bos_id,
        "eos_token_id": vocab.eos_id,
        "torch_dtype": "float16",
    }


def padded_vocab(size: int) -> BpeVocab:
    """The tiny models' 4,096-token BPE, padded with tokens that no text splits into, to ``size`` entries."""
    vocab = BpeVocab.train(4096)
    vocab.tokens += [f"<|synthetic_{i}|>" for i in range(len(vocab.tokens), size)]
    return vocab


def full_bytes(config: dict) -> int:
    h, f, v, n = (config[k] for k in ("hidden_size", "intermediate_size", "vocab_size", "num_hidden_layers"))
    kv = config["num_key_value_heads"] * config["head_dim"]
    return 2 * (2 * v * h + n * (2 * h * h + 2 * kv * h + 3 * f * h))


def weights(config: dict, seed: int) -> dict[str, np.ndarray]:
    """Every tensor a window of one seeded float16 pool (distinct offsets), norms 1: HF names and layout."""
    pool = (np.random.default_rng(seed).standard_normal(POOL, dtype=np.float32) * np.float32(INIT_STD)).astype(
        np.float16
    )
    offset = 0

    def mat(rows: int, cols: int) -> np.ndarray:
        nonlocal offset
        offset = (offset + 7919) % POOL
        return np.resize(np.roll(pool, offset), (rows, cols))

    return llama_weights(config, mat)


def make_synthetic(
    models_dir: Path,
    shape: str,
    *,
    name: str | None = None,
    seed: int = 0,
    gguf_types: tuple[str, ...] = ("Q4_K_M",),
    mlx_bits: tuple[int, ...] = (4,),
    n_ctx: int | None = None,
    drop_full: bool = False,
    overwrite: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ModelManifest:
    say = progress or (lambda _m: None)
    name = name or f"synthetic-{shape}"
    vocab = padded_vocab(SHAPES[shape]["vocab_size"]) if shape in SHAPES else None
    config = shape_config(shape, vocab)
    if n_ctx:
        config["max_position_embeddings"] = n_ctx
    need = 2 * full_bytes(config) * 1.15  # GGUF F16 + MLX bf16, and the quantized forms beside them
    free = shutil.disk_usage(Path(models_dir) if Path(models_dir).exists() else Path(models_dir).parent).free
    if need > free:
        raise UserError(
            "--shape",
            f"{shape} at full precision takes {full_bytes(config) / 1e9:,.1f} GB per engine "
            f"({need / 1e9:,.0f} GB with the quantized forms); {free / 1e9:,.0f} GB are free here. "
            "Writing its quantized forms directly is not built: use a smaller shape or a bigger disk.",
        )
    say(f"{shape}: {full_bytes(config) / 2e9:,.2f}B parameters of seeded random weights")
    w = weights(config, seed)
    params = formats.count_params(w)
    with formats.staged_model_dir(models_dir, name, overwrite=overwrite) as d:
        say("writing GGUF F16")
        f16 = d / "gguf" / f"{name}-F16.gguf"
        formats.write_gguf(f16, config, w, vocab, name=name, dtype="f16")
        say("writing the MLX bf16 folder")
        formats.write_hf_dir(d / "mlx-bf16", config, w, vocab, dtype="bf16")
        del w
        arts = [
            formats.artifact(d, f"gguf/{name}-F16.gguf", "gguf", "F16", "full"),
            formats.artifact(d, "mlx-bf16", "mlx", "bf16", "full"),
        ]
        for t in gguf_types:
            say(f"quantizing GGUF {t} with llama.cpp")
            formats.quantize_gguf(f16, d / "gguf" / f"{name}-{t}.gguf", t)
            arts.append(formats.artifact(d, f"gguf/{name}-{t}.gguf", "gguf", t, _level(t)))
        for bits in mlx_bits:
            say(f"quantizing MLX {bits}-bit (group 64, bf16 scales) with mlx-lm")
            formats.convert_mlx(d / "mlx-bf16", d / f"mlx-{bits}bit", bits, dtype="bfloat16")
            arts.append(formats.artifact(d, f"mlx-{bits}bit", "mlx", f"{bits}bit", f"q{bits}"))
        if drop_full:
            f16.unlink()
            shutil.rmtree(d / "mlx-bf16")
            arts = [a for a in arts if a.level != "full"]
        manifest = ModelManifest(
            name=name,
            params=params,
            n_ctx=config["max_position_embeddings"],
            hidden_size=config["hidden_size"],
            n_layers=config["num_hidden_layers"],
            n_heads=config["num_attention_heads"],
            n_kv_heads=config["num_key_value_heads"],
            vocab_size=len(vocab),
            source=f"make-synthetic shape={shape} seed={seed}",
            synthetic=True,
            artifacts=arts,
        )
        write_manifest(d, manifest)
    say(f"wrote {Path(models_dir) / name}")
    return manifest


def _level(gguf_type: str) -> str:
    return level_of(gguf_type) or "q4"
