"""The workload kinds in the sweep spec: validation, expansion, job ids, examples; the contract results are held to.

No engine runs here: the catalogs are manifests only (expansion never opens an artifact).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from siliconbench.contract.aggregate import percentile, summarize
from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import count_jobs, expand
from siliconbench.contract.manifest import Artifact, ModelCatalog, ModelManifest, write_manifest
from siliconbench.contract.metrics import METRICS
from siliconbench.contract.results import JobResult, JobStatus, Sample, contract_problems
from siliconbench.contract.spec import load_sweep, parse_sweep
from siliconbench.contract.workloads import FACTS, KINDS

ROOT = Path(__file__).resolve().parents[2]
FORMATS = {  # quant -> (format, level)
    "F16": ("gguf", "full"),
    "F32": ("gguf", "full"),
    "f16": ("mlx", "full"),
    "Q8_0": ("gguf", "q8"),
    "Q4_K_M": ("gguf", "q4"),
    "Q4_1": ("gguf", "q4"),
    "f32": ("mlx", "full"),
    "8bit": ("mlx", "q8"),
    "4bit": ("mlx", "q4"),
}


def manifest(name: str, n_ctx: int, quants: list[str]) -> ModelManifest:
    arts = [
        Artifact(
            format=FORMATS[q][0],
            quant=q,
            level=FORMATS[q][1],
            path=f"{FORMATS[q][0]}/{q}",
            size_bytes=1,
            sha256=f"{i:064x}",
        )
        for i, q in enumerate(quants)
    ]
    return ModelManifest(
        name=name,
        params=1,
        n_ctx=n_ctx,
        hidden_size=8,
        n_layers=1,
        n_heads=1,
        n_kv_heads=1,
        vocab_size=10,
        source="test",
        artifacts=arts,
    )


@pytest.fixture
def catalog(tmp_path) -> ModelCatalog:
    """The models the examples name, with their real contexts and formats (the synthetic Llama shapes of the GPU
    examples, `models make-synthetic`, and the user's own `my-model` of examples/your-model.yaml, at q4)."""
    for m in (
        manifest("m1", 4096, ["F16", "Q4_K_M", "f32", "4bit"]),
        manifest("tiny-llama-30m", 4096, ["F16", "Q8_0", "Q4_K_M", "f32", "8bit", "4bit"]),
        manifest("smollm2-135m", 8192, ["F16", "Q4_1", "f32", "4bit"]),
        manifest("synthetic-llama-3.2-1b", 131072, ["Q4_K_M", "4bit"]),
        manifest("synthetic-llama-3-8b", 131072, ["Q4_K_M", "4bit"]),
        manifest("my-model", 8192, ["Q4_K_M", "4bit"]),
    ):
        (tmp_path / m.name).mkdir()
        write_manifest(tmp_path / m.name, m)
    return ModelCatalog(tmp_path)


def sweep(*workloads, **kw):
    return parse_sweep({"name": "t", "models": ["m1"], "workloads": list(workloads), **kw})


def test_generate_job_ids_did_not_change(tmp_path):
    """Ids of generate jobs computed before workloads had params (a pinned sweep id isolates the job key)."""
    from tests.contract.manifests import _manifest

    (tmp_path / "m1").mkdir()
    write_manifest(tmp_path / "m1", _manifest("m1"))
    spec = sweep(
        {"kind": "generate", "prompt_tokens": [64], "gen_tokens": [16], "depth": [0, 32]}, quantizations=["full", "q4"]
    )
    jobs = expand(spec, ModelCatalog(tmp_path), sweep_id="pinned")
    # MLX ids are those computed before workloads had params. llama.cpp ids changed once, on purpose, when its
    # defaults became llama-bench's (flash_attn auto, type_k/type_v): a different measurement, a different id.
    assert [j.job_id for j in jobs] == [
        "04f997bbba672a65",
        "ac8b337cea6af764",
        "c66e8ec6494a91cc",
        "d2d35f4ef922c39a",
        "45ad96557027f6d1",
        "3f272cd2ea23a541",
        "829cb5da438ec68d",
        "e06867c720b5600c",
    ]
    assert all(j.params == {} and "params" not in j.key() for j in jobs)


def test_every_kind_expands_deterministically(catalog):
    spec = sweep(
        {"kind": "swap", "to_quant": "q4"},
        {"kind": "restart"},
        {"kind": "concurrent", "clients": [1, 4]},
        {"kind": "long_context", "depths": [512, 4000]},
        {"kind": "perplexity"},
        {"kind": "multiprocess", "processes": [1, 2]},
        repetitions=2,
    )
    a, b = expand(spec, catalog), expand(spec, catalog)
    assert [j.job_id for j in a] == [j.job_id for j in b] and len({j.job_id for j in a}) == len(a)
    assert len(a) <= count_jobs(spec)
    kinds = [j.workload for j in a]
    assert kinds.count("swap") == 6  # per cache state: llama.cpp with mmap on and off, MLX once
    by = {k: [j for j in a if j.workload == k] for k in set(kinds)}
    assert [j.params["depth"] for j in by["long_context"]] == [512, 512, 4000, 4000]
    assert [j.params["clients"] for j in by["concurrent"]] == [1, 1, 4, 4]
    assert [j.engine for j in by["concurrent"]] == ["llama.cpp", "mlx"] * 2  # engines alternate
    assert all(j.repetitions == 1 and j.warmup == 0 for j in by["perplexity"])  # windows are its samples
    assert all(j.repetitions == 2 for j in by["restart"])
    assert [j.index for j in a] == list(range(len(a)))


def test_swap_resolves_b_per_engine_and_mmap_only_for_llama_cpp(catalog):
    spec = sweep(
        {"kind": "swap", "to_quant": "q4", "cache": ["cold"], "mmap": [True, False]}, quantizations=["full", "q4"]
    )
    jobs = expand(spec, catalog)
    got = [(j.engine, j.quant, j.params["to_quant"], j.params["mmap"]) for j in jobs]
    # q4 -> q4 is no swap: skipped; MLX runs once, with mmap recorded as None
    assert got == [
        ("llama.cpp", "F16", "Q4_K_M", True),
        ("mlx", "f32", "4bit", None),
        ("llama.cpp", "F16", "Q4_K_M", False),
    ]
    assert jobs[0].params["to_artifact"] == "m1/gguf/Q4_K_M" and jobs[1].params["to_artifact"] == "m1/mlx/4bit"
    other = expand(
        sweep({"kind": "swap", "to_model": "smollm2-135m", "to_quant": "Q4_1"}, engines=["llama.cpp"]), catalog
    )
    assert {j.params["to_artifact"] for j in other} == {"smollm2-135m/gguf/Q4_1"}


def test_a_swap_to_full_takes_b_from_the_matched_pair(tmp_path):
    """B of a swap to level full is the sweep's own pair (one weight dtype for both engines), not the first
    full artifact in manifest order (F16 here, beside MLX f32)."""
    (tmp_path / "m1").mkdir()
    write_manifest(tmp_path / "m1", manifest("m1", 4096, ["F16", "F32", "Q4_K_M", "f16", "f32", "4bit"]))
    catalog = ModelCatalog(tmp_path)
    for dtype, pair in (("f32", {"F32", "f32"}), ("f16", {"F16", "f16"})):
        jobs = expand(
            sweep(
                {"kind": "swap", "to_quant": "full", "cache": ["cold"], "mmap": [True]},
                quantizations=["q4"],
                full_dtype=dtype,
            ),
            catalog,
        )
        assert {j.params["to_quant"] for j in jobs} == pair, dtype


@pytest.mark.parametrize(
    "workload, field, needle",
    [
        ({"kind": "swap"}, "workloads[0].to_quant", "required"),
        ({"kind": "swap", "to_quant": "q4", "cache": ["hot"]}, "workloads[0].cache[0]", "cold, warm"),
        ({"kind": "restart", "port": 80}, "workloads[0].port", "1024"),
        ({"kind": "restart", "client_interval_ms": 0}, "workloads[0].client_interval_ms", "greater than 0"),
        ({"kind": "restart", "ready_timeout": 5}, "workloads[0].ready_timeout", "ready_timeout_s"),
        ({"kind": "concurrent", "clients": [0]}, "workloads[0].clients[0]", "greater than 0"),
        ({"kind": "concurrent", "clients": []}, "workloads[0].clients", "at least 1"),
        ({"kind": "long_context", "depths": [-4]}, "workloads[0].depths[0]", "greater than 0"),
        ({"kind": "perplexity", "window_tokens": 1}, "workloads[0].window_tokens", "greater than or equal to 2"),
        ({"kind": "restart", "server": "vllm"}, "workloads[0].server", "llama-server"),
        ({"kind": "multiprocess", "processes": [100]}, "workloads[0].processes[0]", "less than or equal to 64"),
        ({"kind": "benchmark"}, "workloads[0]", "multiprocess"),
    ],
)
def test_structural_errors_name_the_field(workload, field, needle):
    with pytest.raises(UserError) as e:
        sweep(workload)
    assert e.value.field == field
    assert needle in str(e.value)


@pytest.mark.parametrize(
    "workload, field, needle",
    [
        ({"kind": "long_context", "depths": [1024, 4090]}, "workloads[0].depths[1]", "context of 4096"),
        ({"kind": "perplexity", "window_tokens": 5000}, "workloads[0].window_tokens", "context of 4096"),
        ({"kind": "perplexity", "text": "wikitext"}, "workloads[0].text", "'corpus' or the path"),
        ({"kind": "concurrent", "prompt_tokens": 4000, "gen_tokens": 200}, "workloads[0].prompt_tokens", "4096"),
        ({"kind": "swap", "to_quant": "Q2_K"}, "workloads[0].to_quant", "Valid choices"),
        ({"kind": "swap", "to_model": "nope", "to_quant": "q4"}, "workloads[0].to_model", "unknown model"),
    ],
)
def test_impossible_settings_fail_at_expansion(catalog, workload, field, needle):
    with pytest.raises(UserError) as e:
        expand(sweep(workload), catalog)
    assert e.value.field == field
    assert needle in str(e.value)


def test_every_example_expands_against_its_models(catalog):
    """Every sweep of examples/ expands to jobs of every engine it names; none is passed over (the watches are
    watches, tests/coordinator/test_watch.py)."""
    paths = [p for p in sorted((ROOT / "examples").glob("*.yaml")) if not p.name.startswith("watch")]
    assert len(paths) >= 14
    for path in paths:
        spec = load_sweep(path)
        jobs = expand(spec, catalog)
        assert {j.engine for j in jobs} == set(spec.engines), path


def test_metal_vs_mlx_covers_the_reference_tables(catalog):
    spec = load_sweep(ROOT / "examples/metal-vs-mlx.yaml")
    kinds = {w.kind for w in spec.workloads}
    assert {"generate", "long_context", "perplexity"} <= kinds
    gen = next(w for w in spec.workloads if w.kind == "generate")
    assert (gen.prompt_tokens, gen.gen_tokens) == ([512], [128])  # the reference's lengths
    lc = next(w for w in spec.workloads if w.kind == "long_context")
    assert max(lc.depths) + lc.gen_tokens == catalog.get("tiny-llama-30m").n_ctx  # as deep as the model allows
    assert set(spec.quantizations) == {"full", "q8", "q4"}


def test_every_registered_metric_has_unit_direction_scope_and_region():
    for m in METRICS.values():
        assert m.unit and m.better in ("higher", "lower") and m.scope and len(m.region) > 40, m.name


def test_a_result_outside_the_contract_is_refused_naming_what():
    """What the worker emits is checked against the registry where its result is made and where it is stored
    (siliconbench/worker/workloads/run_workload, siliconbench/storage/result_store): every engine test's job passes through that check."""
    ok = JobResult(
        job_id="j",
        status=JobStatus.ok,
        samples=[Sample(repetition=0, values={"decode_tps": 1.0})],
        extra={"workload": "generate", "n_ctx": 16, "thermal": {}},
    )
    assert contract_problems(ok, "generate") == []
    odd = ok.model_copy(
        update={
            "samples": [Sample(repetition=0, values={"decode_tps": 1.0, "tokens_per_watt": 2.0})],
            "extra": {"n_ctx": 16, "kv_note": "x"},
        }
    )
    problems = contract_problems(odd, "generate")
    assert "tokens_per_watt" in problems[0] and "siliconbench/contract/metrics.py" in problems[0]
    assert "kv_note" in problems[1] and "'generate'" in problems[1]
    assert set(FACTS) == set(KINDS)


def test_only_count_metrics_have_a_total():
    """A sum of percentages or rates means nothing (decode_bandwidth_pct's 'total' read 360-407 %)."""
    assert summarize([90.0, 95.0], "decode_bandwidth_pct").total is None
    assert summarize([10.0, 12.0], "decode_tps").total is None
    assert summarize([1.0, 2.0], "request_errors").total == 3.0
    assert {m.name for m in METRICS.values() if m.kind == "count"} == {
        "restart_failed_requests",
        "restart_requests",
        "request_errors",
        "serve_failed_requests",
        "serve_prompt_tokens",  # token counts add up: the run's prompt tokens, output tokens, cached tokens
        "serve_output_tokens",
        "serve_cached_prompt_tokens",
    }


def test_percentiles_match_numpy():
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 100):
        xs = list(rng.exponential(size=n))
        s = summarize(xs)
        assert s.p90 == pytest.approx(np.percentile(xs, 90)) and s.p99 == pytest.approx(np.percentile(xs, 99))
        assert s.p50 == s.median
    with pytest.raises(ValueError):
        percentile([], 50)
