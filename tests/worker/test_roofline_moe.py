"""A mixture of experts' roofline: a decode step reads the shared weights, the router and only the experts a token is
routed to. The counts come from the files (GGUF ``<arch>.expert_count``/``expert_used_count``, config.json
``num_experts``/``num_experts_per_tok``); files written here in llama.cpp's, mlx-lm's and Hugging Face's tensor names
(the reader reads headers only, so the weights need not be a trained model)."""

from __future__ import annotations

import json

import gguf
import numpy as np
from safetensors.numpy import save_file

from siliconbench.worker.measure import roofline

EMBD, FF, VOCAB, EXPERTS, USED = 64, 32, 100, 8, 2


def _gguf_moe(path, shared: bool) -> dict[str, int]:
    """A qwen3moe-shaped GGUF header in F32; returns each tensor's bytes."""
    w = gguf.GGUFWriter(str(path), "qwen3moe")
    w.add_block_count(1)
    w.add_expert_count(EXPERTS)
    w.add_expert_used_count(USED)
    tensors = {
        "token_embd.weight": np.zeros((VOCAB, EMBD), np.float32),
        "output.weight": np.zeros((VOCAB, EMBD), np.float32),
        "blk.0.attn_q.weight": np.zeros((EMBD, EMBD), np.float32),
        "blk.0.ffn_gate_inp.weight": np.zeros((EXPERTS, EMBD), np.float32),  # the router: every token reads it
        "blk.0.ffn_gate_exps.weight": np.zeros((EXPERTS, FF, EMBD), np.float32),
        "blk.0.ffn_up_exps.weight": np.zeros((EXPERTS, FF, EMBD), np.float32),
        "blk.0.ffn_down_exps.weight": np.zeros((EXPERTS, EMBD, FF), np.float32),
    }
    if shared:
        tensors["blk.0.ffn_up_shexp.weight"] = np.zeros((FF, EMBD), np.float32)
    for name, t in tensors.items():
        w.add_tensor(name, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return {k: v.nbytes for k, v in tensors.items()}


def test_gguf_counts_the_routed_experts_a_token_reads(tmp_path):
    sizes = _gguf_moe(tmp_path / "moe.gguf", shared=True)
    read = roofline.weights_read(tmp_path / "moe.gguf")
    routed = sum(v for k, v in sizes.items() if "_exps." in k)
    embd_row = sizes["token_embd.weight"] // VOCAB  # untied: one row per token
    expected = sum(sizes.values()) - sizes["token_embd.weight"] + embd_row - routed + routed * USED // EXPERTS
    assert read["bytes"] == expected
    assert read["experts"] == {"count": EXPERTS, "used": USED, "routed_bytes": routed, "routed_bytes_read": routed // 4}
    # the shared expert and the router are read whole: only the routed tensors were scaled
    assert read["bytes"] > (sum(sizes.values()) - routed) * 0.9


def test_a_dense_model_is_read_whole(tmp_path):
    w = gguf.GGUFWriter(str(tmp_path / "dense.gguf"), "llama")
    w.add_block_count(1)
    w.add_tensor("output.weight", np.zeros((VOCAB, EMBD), np.float32))
    w.add_tensor("blk.0.ffn_up.weight", np.zeros((FF, EMBD), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    read = roofline.weights_read(tmp_path / "dense.gguf")
    assert read == {"bytes": (VOCAB * EMBD + FF * EMBD) * 4} and roofline.expert_counts(tmp_path / "dense.gguf") is None


def test_folders_in_hugging_face_and_mlx_names(tmp_path):
    hf, mlx = tmp_path / "hf", tmp_path / "mlx"
    hf.mkdir()
    mlx.mkdir()
    shared = {
        "model.embed_tokens.weight": np.zeros((VOCAB, EMBD), np.float16),
        "lm_head.weight": np.zeros((VOCAB, EMBD), np.float16),
        "model.layers.0.mlp.gate.weight": np.zeros((EXPERTS, EMBD), np.float16),
        "model.layers.0.mlp.shared_experts.up_proj.weight": np.zeros((FF, EMBD), np.float16),
    }
    per_expert = {
        f"model.layers.0.mlp.experts.{e}.up_proj.weight": np.zeros((FF, EMBD), np.float16) for e in range(EXPERTS)
    }
    save_file({**shared, **per_expert}, str(hf / "model.safetensors"))
    (hf / "config.json").write_text(json.dumps({"num_experts": EXPERTS, "num_experts_per_tok": USED}))
    stacked = {"model.layers.0.mlp.switch_mlp.up_proj.weight": np.zeros((EXPERTS, FF, EMBD), np.float16)}
    save_file({**shared, **stacked}, str(mlx / "model.safetensors"))
    # a multimodal wrapper keeps the language model's counts under text_config
    (mlx / "config.json").write_text(
        json.dumps({"text_config": {"num_local_experts": EXPERTS, "num_experts_per_tok": USED}})
    )
    routed = EXPERTS * FF * EMBD * 2
    base = sum(v.nbytes for v in shared.values()) - VOCAB * EMBD * 2 + EMBD * 2
    for folder in (hf, mlx):
        read = roofline.weights_read(folder)
        assert read["experts"]["routed_bytes"] == routed, folder.name
        assert read["bytes"] == base + routed * USED // EXPERTS, folder.name
