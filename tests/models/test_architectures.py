"""Every model in two forms: the Hugging Face model_type ↔ llama.cpp architecture table, each entry checked against
the installed gguf package and mlx-lm; a mixture of experts made here (Qwen3-MoE) added as a GGUF and an MLX folder
under their two names, both engines giving the same greedy tokens, running a generate sweep and serving requests
from their own servers; and a pair whose expert counts differ refused naming the field."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import MANIFEST_NAME, ModelCatalog
from siliconbench.contract.spec import parse_sweep

from siliconbench.worker.models.add import add_model
from siliconbench.worker.models.architectures import LLAMA_CPP_ARCH, llama_cpp_arch
from siliconbench.worker.models.facts import form_facts
from siliconbench.worker.models.make.moe import write_tiny_moe
from tests.models.greedy import assert_same_greedy, llama, llama_greedy, mlx_greedy
from tests.workload_helpers import run, values


@pytest.mark.parametrize("model_type", sorted(LLAMA_CPP_ARCH))
def test_each_entry_names_an_architecture_both_engines_run(model_type):
    import gguf
    from mlx_lm.utils import MODEL_REMAPPING

    assert LLAMA_CPP_ARCH[model_type] in set(gguf.MODEL_ARCH_NAMES.values()), "llama.cpp has no such architecture"
    module = MODEL_REMAPPING.get(model_type, model_type)
    assert importlib.util.find_spec(f"mlx_lm.models.{module}") is not None, "mlx-lm has no such model"


def test_the_common_pairs_are_one_family():
    pairs = {
        "qwen3_moe": "qwen3moe",
        "qwen2_moe": "qwen2moe",
        "gpt_oss": "gpt-oss",
        "deepseek_v3": "deepseek2",
        "mixtral": "llama",
        "gemma3_text": "gemma3",
        "cohere": "command-r",
    }
    assert {t: llama_cpp_arch(t) for t in pairs} == pairs
    assert llama_cpp_arch("qwen3moe") == "qwen3moe" and llama_cpp_arch("somebody_new") == "somebody_new"


@pytest.fixture(scope="module")
def moe_sources(tmp_path_factory):
    return write_tiny_moe(tmp_path_factory.mktemp("moe"))


def test_a_mixture_of_experts_added_in_both_forms_runs_on_both_engines(moe_sources, tmp_path):
    gguf_path, folder = moe_sources
    facts = {f.format: f for f in (form_facts(gguf_path), form_facts(folder))}
    assert (facts["gguf"].architecture, facts["mlx"].architecture) == ("qwen3moe", "qwen3_moe")
    assert facts["gguf"].shape() == facts["mlx"].shape()
    assert facts["gguf"].shape()["n_experts"] == 8 and facts["gguf"].shape()["n_experts_used"] == 2

    models = tmp_path / "models"
    m = add_model(models, "my-moe", [str(gguf_path), str(folder)])
    assert m.family == "qwen3moe" and (m.n_experts, m.n_experts_used) == (8, 2)
    assert {(a.format, a.quant) for a in m.artifacts} == {("gguf", "F32"), ("mlx", "f32")}

    # the same network: both engines pick the same greedy tokens from the same ids
    from mlx_lm import load

    ids = [1, 17, 230, 45, 99, 7, 512, 3]
    model, tok = load(str(models / "my-moe" / m.artifact_for("mlx", "f32").path))
    mine = mlx_greedy(model, tok, ids, 8)
    theirs = llama_greedy(llama(models / "my-moe" / m.artifact_for("llama.cpp", "F32").path), ids, 8)
    assert_same_greedy(mine, theirs, eos=m.vocab_size)  # random weights never pick EOS on purpose: all 8 agree

    spec = parse_sweep(
        {
            "name": "moe",
            "models": ["my-moe"],
            "engines": ["llama.cpp", "mlx"],
            "quantizations": ["full"],
            "full_dtype": "f32",
            "workloads": [{"kind": "generate", "prompt_tokens": [32], "gen_tokens": [8]}],
            "repetitions": 1,
            "warmup": 0,
            "timeout_s": 300,
        }
    )
    for job in expand(spec, ModelCatalog(models)):
        res, _events = run(job, models)
        assert res.status == "ok", (job.engine, res.error, res.stderr_tail)
        assert values(res, "decode_tps")[0] > 0
        # the roofline reads the expert counts from each form's own files
        assert res.extra["roofline"]["experts"]["count"] == 8 and res.extra["roofline"]["experts"]["used"] == 2

    # and served: each engine's own server answers the same raw-text requests with exactly max_tokens
    served = parse_sweep(
        {
            "name": "moe-serve",
            "models": ["my-moe"],
            "engines": ["llama.cpp", "mlx"],
            "quantizations": ["full"],
            "full_dtype": "f32",
            "workloads": [
                {"kind": "serve", "endpoint": "completions", "num_requests": 3, "prompt_tokens": 16, "max_tokens": 4}
            ],
            "repetitions": 1,
            "warmup": 0,
            "timeout_s": 300,
        }
    )
    for job in expand(served, ModelCatalog(models)):
        res, _events = run(job, models)
        assert res.status == "ok", (job.engine, res.error, res.stderr_tail)
        assert values(res, "serve_output_tokens") == [4.0] * 3


def test_a_pair_whose_expert_counts_differ_is_refused_naming_the_field(moe_sources, tmp_path):
    gguf_path, folder = moe_sources
    odd = tmp_path / "odd"
    shutil.copytree(folder, odd, ignore=shutil.ignore_patterns("*.safetensors"))
    for f in folder.glob("*.safetensors"):
        (odd / f.name).symlink_to(f)
    config = json.loads((odd / "config.json").read_text())
    (odd / "config.json").write_text(json.dumps({**config, "num_experts_per_tok": 4}))
    with pytest.raises(UserError) as e:
        add_model(tmp_path / "models", "my-moe", [str(gguf_path), str(odd)])
    assert e.value.field == "n_experts_used" and "has n_experts_used 4" in e.value.message
    assert not (tmp_path / "models" / "my-moe" / MANIFEST_NAME).exists()  # nothing half-made
