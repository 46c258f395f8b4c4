"""Like with like: level `full` pairs artifacts of one weight dtype per platform, and the ratio tables mark a
pair whose weight dtypes differ. Real models (the session's tiny model, made with every dtype)."""

from __future__ import annotations

import pytest

from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import expand, full_dtype_of
from siliconbench.contract.manifest import ModelCatalog, auto_full_dtype, weight_dtype, weights_of, write_manifest
from siliconbench.contract.spec import parse_sweep

from siliconbench.dashboard.tables import ratio_table as dashboard_ratio_table
from siliconbench.worker.job.child import run_in_child
from tests.conftest import SMALL

NEW = ("F32", "f16", "bf16")  # the artifacts a manifest written before this change lacks


def sweep(**kw):
    return parse_sweep(
        {
            "name": "like",
            "models": [SMALL],
            "repetitions": 2,
            "warmup": 0,
            "workloads": [{"kind": "generate", "prompt_tokens": [16], "gen_tokens": [4], "depth": [0]}],
            **kw,
        }
    )


def catalog(models_dir, *platforms: str) -> ModelCatalog:
    return ModelCatalog(models_dir, platforms=platforms or None)


def quants(jobs) -> dict[str, str]:
    return {j.engine: j.quant for j in jobs}


@pytest.fixture
def old_models_dir(models_dir, tmp_path):
    """The same model as a manifest from before the F32 / f16 / bf16 artifacts (GGUF F16, MLX f32 only)."""
    m = ModelCatalog(models_dir).get(SMALL)
    old = m.model_copy(update={"artifacts": [a for a in m.artifacts if a.quant not in NEW]})
    (tmp_path / SMALL).mkdir()
    write_manifest(tmp_path / SMALL, old)
    return tmp_path


def test_weight_dtype_normalises_every_name():
    same = [
        ("F32", "f32", "all F32", "float32"),
        ("F16", "f16", "float16"),
        ("BF16", "bf16", "bfloat16"),
        ("Q8_0", "8bit"),
        ("Q4_K_M", "Q4_1", "4bit", "Q4_K - Medium", "IQ4_NL - 4.5 bpw"),
    ]
    for names in same:
        assert len({weight_dtype(n) for n in names}) == 1, names
    assert len({weight_dtype(names[0]) for names in same}) == len(same)
    assert weights_of("F16", {"weights": "all F32"}) == "f32" and weights_of("F16", {}) == weights_of("F16") == "f16"


def test_full_is_a_matched_pair_per_platform(models_dir):
    spec = sweep()
    assert quants(expand(spec, catalog(models_dir, "Linux"))) == {"llama.cpp": "F32", "mlx": "f32"}
    assert quants(expand(spec, catalog(models_dir, "Darwin"))) == {"llama.cpp": "F16", "mlx": "f16"}
    for platforms in (("Linux",), ("Darwin",)):
        jobs = expand(spec, catalog(models_dir, *platforms))
        assert len({weight_dtype(j.quant) for j in jobs}) == 1 and {j.quant_level for j in jobs} == {"full"}
        m = ModelCatalog(models_dir).get(SMALL)
        for j in jobs:  # the job points at the artifact it names
            art = m.artifact_for(j.engine, j.quant)
            assert j.artifact == f"{SMALL}/{art.path}" and j.model_sha256 == art.sha256
    # this machine's catalog is this machine's platform
    here = expand(spec, ModelCatalog(models_dir))
    assert quants(here) == quants(
        expand(spec, catalog(models_dir, auto_full_dtype(ModelCatalog(models_dir).platforms)))
    )


def test_full_dtype_setting_and_exact_names(models_dir):
    spec = sweep()
    linux = catalog(models_dir, "Linux")
    assert quants(expand(spec, linux, full_dtype="f16")) == {"llama.cpp": "F16", "mlx": "f16"}
    assert quants(expand(spec, linux, full_dtype="auto")) == {"llama.cpp": "F32", "mlx": "f32"}
    # bf16 exists only for MLX: llama.cpp sits it out, as with an exact name one format lacks
    assert quants(expand(spec, linux, full_dtype="bf16")) == {"mlx": "bf16"}
    with pytest.raises(UserError, match="full_dtype"):
        expand(spec, linux, full_dtype="f8")
    # exact quant names keep working as they did: F16 is GGUF's only, f16 MLX's only
    assert quants(expand(sweep(quantizations=["F16"]), linux)) == {"llama.cpp": "F16"}
    assert quants(expand(sweep(quantizations=["f16"]), linux)) == {"mlx": "f16"}
    exact = expand(sweep(quantizations=["F16", "f32"]), linux)
    assert [(j.engine, j.quant) for j in exact] == [("llama.cpp", "F16"), ("mlx", "f32")]
    # q8 / q4 are unchanged
    assert quants(expand(sweep(quantizations=["q4"]), linux)) == {"llama.cpp": "Q4_K_M", "mlx": "4bit"}


def test_hosts_of_both_kinds_need_a_setting(models_dir):
    mixed = catalog(models_dir, "Darwin", "Linux")
    with pytest.raises(UserError, match="full_dtype") as e:
        expand(sweep(), mixed)
    assert e.value.field == "full_dtype"
    assert quants(expand(sweep(), mixed, full_dtype="f32")) == {"llama.cpp": "F32", "mlx": "f32"}
    assert expand(sweep(quantizations=["q4"]), mixed)  # only level full depends on the platform
    assert full_dtype_of(sweep(), catalog(models_dir, "Darwin")) == ("f16", False)


def test_an_old_manifest_still_expands_and_keeps_its_job_ids(models_dir, old_models_dir):
    spec = sweep()
    for platform in ("Linux", "Darwin"):
        old = expand(spec, catalog(old_models_dir, platform))
        assert quants(old) == {"llama.cpp": "F16", "mlx": "f32"}  # the pair it has, as before (dtypes differ)
    # where the chosen artifact is the same, so is the job id: MLX f32 on Linux, llama.cpp F16 on a Mac
    ids = lambda d, p: {j.engine: j.job_id for j in expand(spec, catalog(d, p))}  # noqa: E731
    assert ids(old_models_dir, "Linux")["mlx"] == ids(models_dir, "Linux")["mlx"]
    assert ids(old_models_dir, "Darwin")["llama.cpp"] == ids(models_dir, "Darwin")["llama.cpp"]
    assert ids(old_models_dir, "Linux")["llama.cpp"] != ids(models_dir, "Linux")["llama.cpp"]  # F16 -> F32
    assert quants(expand(spec, catalog(old_models_dir, "Linux"), full_dtype="f16")) == {"llama.cpp": "F16"}


def test_the_linux_pair_runs_with_matching_recorded_dtypes(models_dir):
    """Both engines really load level full's pair here, and say they computed on float32 weights."""
    jobs = expand(sweep(), catalog(models_dir, "Linux"))
    weights = set()
    for job in jobs:
        res = run_in_child(job, models_dir)
        assert res.status == "ok", (res.error, res.stderr_tail)
        dtypes = res.environment.dtypes
        assert weights_of(job.quant, dtypes) == weight_dtype(job.quant) == "f32", dtypes
        weights.add(weights_of(job.quant, dtypes))
    assert weights == {"f32"}


def dash_row(engine: str, quant: str, mean: float, **extra) -> dict:
    return {
        "config": "tiny full · p16 g4 d0 · h",
        "engine": engine,
        "series": f"{engine} 1.0",
        "quant": quant,
        "metrics": {"prefill_tps": {"mean": mean}},
        **extra,
    }


def test_dashboard_ratio_table_marks_mixed_dtypes():
    mixed = dashboard_ratio_table([dash_row("llama.cpp", "F16", 200.0), dash_row("mlx", "f32", 100.0)])
    assert list(mixed["weights"]) == ["⚠ f16 ≠ f32 (mixed dtypes)"] and list(mixed["same dtype"]) == [False]
    assert list(mixed["prompt tok/s ×"]) == [2.0]
    matched = dashboard_ratio_table([dash_row("llama.cpp", "F32", 200.0), dash_row("mlx", "f32", 100.0)])
    assert list(matched["weights"]) == ["f32"] and list(matched["same dtype"]) == [True]
    # recorded dtypes win over the quant name where a row carries them
    recorded = dashboard_ratio_table(
        [
            dash_row("llama.cpp", "F16", 200.0, dtypes={"weights": "F16"}),
            dash_row("mlx", "f32", 100.0, dtypes={"weights": "f16"}),
        ]
    )
    assert list(recorded["same dtype"]) == [True]
