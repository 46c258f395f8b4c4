"""`write_tiny_moe`: a seeded random mixture of experts in Qwen3-MoE's architecture, as the two files a user brings —
a Hugging Face folder (``model_type: qwen3_moe``, mlx-lm's loader stacks its experts) and a GGUF
(``general.architecture: qwen3moe``, the experts stacked as convert_hf_to_gguf.py stacks them) — so that
``models add`` meets the two names of one network, and both engines run it.

It writes sources, not a model folder: adding them (``siliconbench models add NAME GGUF FOLDER``) is the journey
under test. Weights and tokenizer as make-tiny's (seeded N(0, 0.02), float16-representable, a BPE vocabulary
trained on the shipped corpus).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from siliconbench.worker.models.make import formats
from siliconbench.worker.models.make.tiny import INIT_STD, RMS_NORM_EPS, ROPE_THETA
from siliconbench.worker.models.make.tokenizer import BpeVocab

EXPERT_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")


def moe_config(
    vocab: BpeVocab, *, hidden_size: int, n_layers: int, n_heads: int, n_kv_heads: int, head_dim: int,
    n_experts: int, n_experts_used: int, expert_size: int, n_ctx: int,
) -> dict:  # fmt: skip
    """Qwen3-MoE's config.json: every layer sparse, the routing weights renormalized (norm_topk_prob)."""
    return {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "hidden_size": hidden_size,
        "intermediate_size": expert_size,  # no dense layer uses it (mlp_only_layers is empty)
        "moe_intermediate_size": expert_size,
        "num_hidden_layers": n_layers,
        "num_attention_heads": n_heads,
        "num_key_value_heads": n_kv_heads,
        "head_dim": head_dim,
        "num_experts": n_experts,
        "num_experts_per_tok": n_experts_used,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "norm_topk_prob": True,
        "hidden_act": "silu",
        "max_position_embeddings": n_ctx,
        "rms_norm_eps": RMS_NORM_EPS,
        "rope_theta": ROPE_THETA,
        "vocab_size": len(vocab),
        "tie_word_embeddings": False,
        "attention_bias": False,
        "bos_token_id": vocab.bos_id,
        "eos_token_id": vocab.eos_id,
    }


def moe_weights(config: dict, seed: int) -> dict[str, np.ndarray]:
    """Every tensor in Hugging Face's names and layout, one set of projections per expert, in a fixed order."""
    rng = np.random.default_rng(seed)

    def mat(rows: int, cols: int) -> np.ndarray:
        w = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(INIT_STD)
        return w.astype(np.float16).astype(np.float32)

    h, v, d = config["hidden_size"], config["vocab_size"], config["head_dim"]
    q, kv, f = config["num_attention_heads"] * d, config["num_key_value_heads"] * d, config["moe_intermediate_size"]
    weights = {"model.embed_tokens.weight": mat(v, h)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        weights[p + "input_layernorm.weight"] = np.ones(h, np.float32)
        weights[p + "self_attn.q_proj.weight"] = mat(q, h)
        weights[p + "self_attn.k_proj.weight"] = mat(kv, h)
        weights[p + "self_attn.v_proj.weight"] = mat(kv, h)
        weights[p + "self_attn.o_proj.weight"] = mat(h, q)
        weights[p + "self_attn.q_norm.weight"] = np.ones(d, np.float32)
        weights[p + "self_attn.k_norm.weight"] = np.ones(d, np.float32)
        weights[p + "post_attention_layernorm.weight"] = np.ones(h, np.float32)
        weights[p + "mlp.gate.weight"] = mat(config["num_experts"], h)  # the router
        for e in range(config["num_experts"]):
            weights[p + f"mlp.experts.{e}.gate_proj.weight"] = mat(f, h)
            weights[p + f"mlp.experts.{e}.up_proj.weight"] = mat(f, h)
            weights[p + f"mlp.experts.{e}.down_proj.weight"] = mat(h, f)
    weights["model.norm.weight"] = np.ones(h, np.float32)
    weights["lm_head.weight"] = mat(v, h)
    return weights


def stack_experts(weights: dict[str, np.ndarray], config: dict) -> dict[str, np.ndarray]:
    """The GGUF's view: each layer's experts stacked into one [experts, out, in] tensor per projection
    (``model.layers.{i}.mlp.experts.{proj}.weight``, written as ``blk.{i}.ffn_{gate,up,down}_exps.weight``)."""
    out = {k: w for k, w in weights.items() if ".mlp.experts." not in k}
    for i in range(config["num_hidden_layers"]):
        for proj in EXPERT_PROJECTIONS:
            experts = [weights[f"model.layers.{i}.mlp.experts.{e}.{proj}.weight"] for e in range(config["num_experts"])]
            out[f"model.layers.{i}.mlp.experts.{proj}.weight"] = np.stack(experts)
    return out


def write_tiny_moe(
    out_dir: Path,
    *,
    name: str = "tiny-qwen3-moe",
    seed: int = 0,
    hidden_size: int = 128,
    n_layers: int = 2,
    n_heads: int = 4,
    n_kv_heads: int = 2,
    head_dim: int = 32,
    n_experts: int = 8,
    n_experts_used: int = 2,
    expert_size: int = 256,
    vocab_size: int = 1024,
    n_ctx: int = 2048,
) -> tuple[Path, Path]:
    """(the GGUF F32, the Hugging Face f32 folder) of one random Qwen3-MoE network, written under ``out_dir``."""
    vocab = BpeVocab.train(vocab_size)
    config = moe_config(
        vocab,
        hidden_size=hidden_size,
        n_layers=n_layers,
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        head_dim=head_dim,
        n_experts=n_experts,
        n_experts_used=n_experts_used,
        expert_size=expert_size,
        n_ctx=n_ctx,
    )
    weights = moe_weights(config, seed)
    folder = out_dir / f"{name}-hf"
    formats.write_hf_dir(folder, config, weights, vocab, dtype="f32")
    gguf_path = out_dir / f"{name}-F32.gguf"
    formats.write_gguf(
        gguf_path, config, stack_experts(weights, config), vocab, name=name, dtype="f32", arch="qwen3moe"
    )
    return gguf_path, folder
