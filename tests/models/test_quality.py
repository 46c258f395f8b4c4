"""KL-divergence against full precision on both real engines (the perplexity workload's kl_divergence), beside
llama-perplexity --kl-divergence on the same files; every form of a model in one sweep; the quantization matrix."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import yaml

from siliconbench.contract.errors import UserError

from siliconbench.coordinator.reports.quant_matrix import MatrixRow, mark_frontier, matrix_rows
from siliconbench.worker.models.quants.imatrix import tools_dir
from siliconbench.worker.quality import bases
from siliconbench.worker.quality.kld import base_rows, compare, summary
from tests.conftest import SMALL
from tests.workload_helpers import jobs_for, run, values

W, N = 64, 4  # 4 x 31 = 124 scored positions: llama-perplexity prints its statistics from 100 on


@pytest.fixture
def models(tmp_path, models_dir):
    d = tmp_path / "models"
    shutil.copytree(models_dir / SMALL, d / SMALL, copy_function=os.link)  # hard links; the bases land in d
    return d


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def test_the_arithmetic_is_kl_divergence_within_the_base_files_precision():
    rng = np.random.default_rng(7)
    base = (rng.normal(size=(200, 3000)) * 3).astype(np.float32)
    model = base + (rng.normal(size=base.shape) * 0.3).astype(np.float32)
    targets = rng.integers(0, 3000, size=200)
    stats = compare(model, base_rows(base), targets)
    p, q = _log_softmax(base), _log_softmax(model)
    exact = (np.exp(p) * (p - q)).sum(axis=1)
    assert stats.kld.mean() == pytest.approx(exact.mean(), rel=1e-3)
    assert np.array_equal(stats.same_top, base.argmax(axis=1) == model.argmax(axis=1))
    assert np.allclose(stats.nll, -q[np.arange(200), targets], rtol=1e-4)
    itself = summary([compare(base, base_rows(base), targets)])
    assert itself["kld_mean"] < 1e-5 and itself["same_top_pct"] == 100.0  # only the uint16 rounding is left
    s = summary([stats])
    assert s["kld_median"] <= s["kld_p90"] <= s["kld_p99"] <= s["kld_p999"] <= s["kld_max"]


def test_every_form_against_both_engines_full_precision_with_each_base_computed_once(models):
    jobs = jobs_for(
        models, {"kind": "perplexity", "kl_divergence": True, "window_tokens": W, "windows": N}, quantizations=["all"]
    )
    forms = {(j.engine, j.quant) for j in jobs}
    assert {
        ("llama.cpp", "F32"),
        ("llama.cpp", "F16"),
        ("llama.cpp", "Q8_0"),
        ("llama.cpp", "Q4_K_M"),
        ("mlx", "f32"),
        ("mlx", "8bit"),
        ("mlx", "4bit"),
    } <= forms  # [all]: every form, not one per level
    bases_of = {tuple(sorted((b["engine"], b["quant"]) for b in j.params["kld_bases"])) for j in jobs}
    assert bases_of == {(("llama.cpp", "F32"), ("mlx", "f32"))}  # the highest precision both engines share
    by = {}
    order = sorted(jobs, key=lambda j: (j.quant_level != "q4", j.engine))  # a quantized form first: it makes bases
    for job in order:
        res, events = run(job, models)
        assert res.status == "ok", (job.label(), res.error, res.stderr_tail)
        by[(job.engine, job.quant)] = (res, [e for e in events if e["event"] == "kld_base"])
    first = by[(order[0].engine, order[0].quant)]
    assert first[0].extra["kld"]["same"]["computed_here"] and first[0].extra["kld"]["cross"]["computed_here"]
    assert len(first[1]) == 2  # both bases computed by the first job, before its own model
    for key, (res, computed) in by.items():
        if key != (order[0].engine, order[0].quant):
            assert computed == [] and not res.extra["kld"]["same"]["computed_here"], key  # read, never again
    store = list((models / ".kld-bases").glob("*.npz"))
    assert len(store) == 2
    full = {e: values(by[(e, q)][0], "kld_mean")[0] for e, q in (("llama.cpp", "F32"), ("mlx", "f32"))}
    assert full["llama.cpp"] < 1e-4 and full["mlx"] < 1e-4  # a base against itself: the uint16 rounding only
    assert values(by[("llama.cpp", "F32")][0], "same_top_pct")[0] == 100.0
    for engine, q8, q4 in (("llama.cpp", "Q8_0", "Q4_K_M"), ("mlx", "8bit", "4bit")):
        k8, k4 = (values(by[(engine, q)][0], "kld_mean")[0] for q in (q8, q4))
        assert full[engine] < k8 < k4, (engine, k8, k4)  # fewer bits, further from the original
        cross8, cross4 = (values(by[(engine, q)][0], "cross_kld_mean")[0] for q in (q8, q4))
        assert cross8 < cross4
    # the two full precisions of one model agree closely across engines (same weights, different kernels)
    assert values(by[("mlx", "f32")][0], "cross_kld_mean")[0] < 1e-3
    res = by[("mlx", "4bit")][0]
    assert res.extra["kld"]["cross"]["engine"] == "llama.cpp" and res.extra["bits_per_weight"] > 4
    assert len(values(res, "window_kld")) == N


def test_kl_divergence_needs_a_full_precision_form(models):
    manifest = models / SMALL / "manifest.json"
    data = json.loads(manifest.read_text())
    data["artifacts"] = [a for a in data["artifacts"] if a["level"] != "full"]
    manifest.unlink()  # a hard link to the session's manifest: replaced, not written through
    manifest.write_text(json.dumps(data))
    with pytest.raises(UserError) as e:
        jobs_for(
            models,
            {"kind": "perplexity", "kl_divergence": True, "window_tokens": W, "windows": N},
            quantizations=["q4"],
        )
    assert e.value.field == "workloads[0].kl_divergence"


def test_a_sweep_pairs_levels_by_the_usual_types_unless_it_says_otherwise(models):
    jobs = jobs_for(
        models,
        {"kind": "perplexity", "window_tokens": W, "windows": 1},
        quantizations=["q4"],
        pairing={"q4": {"mlx": "4bit"}},
    )
    assert {(j.engine, j.quant) for j in jobs} == {("llama.cpp", "Q4_K_M"), ("mlx", "4bit")}
    with pytest.raises(UserError) as e:
        jobs_for(
            models,
            {"kind": "perplexity", "window_tokens": W, "windows": 1},
            quantizations=["q4"],
            pairing={"q4": {"llama.cpp": "IQ4_XS"}},
        )
    assert e.value.field == "pairing.q4.llama.cpp"
    with pytest.raises(UserError) as e:
        jobs_for(models, {"kind": "perplexity", "window_tokens": W, "windows": 1}, quantizations=["all", "q4"])
    assert "quantizations" in e.value.field


def test_the_base_store_refuses_what_would_not_fit():
    with pytest.raises(Exception, match="fewer windows"):
        bases.check_size(windows=10_000, positions=4096, vocab=128_256)


def _row(fmt, size, kld, engine="llama.cpp"):
    return MatrixRow("m", engine, fmt, "q4", fmt, size_bytes=size, kld={"llama.cpp": kld})


def test_the_frontier_keeps_what_no_other_format_beats_on_both_size_and_kld():
    rows = [
        _row("F32", 100, 0.0),
        _row("Q8_0", 30, 0.001),
        _row("Q6_K", 25, 0.004),
        _row("bad", 28, 0.01),
        _row("Q4_K_M", 18, 0.02),
        _row("Q4_0", 19, 0.03),
        _row("Q2_K", 10, 0.3),
    ]
    mark_frontier(rows, "llama.cpp")
    assert {r.format for r in rows if r.frontier} == {"F32", "Q8_0", "Q6_K", "Q4_K_M", "Q2_K"}


def test_matrix_rows_join_perplexity_and_generate_records_per_format():
    def rec(workload, engine, quant, metrics, extra=None, **kw):
        return {
            "status": "ok",
            "workload": workload,
            "model": "m",
            "engine": engine,
            "quant": quant,
            "quant_level": "q4",
            "metrics": {k: {"mean": v} for k, v in metrics.items()},
            "extra": extra or {},
            "peak_memory_bytes": kw.get("peak"),
            **{k: {"mean": v} for k, v in kw.get("top", {}).items()},
        }

    kld = {"same": {"engine": "mlx", "quant": "f32"}, "cross": {"engine": "llama.cpp", "quant": "F32"}}
    records = [
        rec(
            "perplexity",
            "mlx",
            "4bit",
            {
                "perplexity": 9.0,
                "file_size_bytes": 5e6,
                "kld_mean": 0.02,
                "same_top_pct": 90.0,
                "cross_kld_mean": 0.021,
                "cross_same_top_pct": 89.0,
                "kld_p99": 0.2,
            },
            {"kld": kld, "format": "MLX 4-bit (group 64)", "bits_per_weight": 4.5},
        ),
        rec("generate", "mlx", "4bit", {}, peak=123, top={"prefill_tps": 1000.0, "decode_tps": 50.0}),
    ]
    (row,) = matrix_rows(records)["m"]
    assert row.kld == {"mlx": 0.02, "llama.cpp": 0.021} and row.same_top_pct["llama.cpp"] == 89.0
    assert (row.prefill_tps, row.decode_tps, row.peak_memory_bytes, row.bits_per_weight) == (1000.0, 50.0, 123, 4.5)
    assert row.frontier  # alone, nothing beats it


@pytest.mark.solo  # llama-perplexity's log thread drops its closing statistics when the machine is loaded
def test_ours_beside_llama_perplexity_kl_divergence_on_the_same_files(models):
    """Mean KLD within 1 % of llama-perplexity --kl-divergence and the same-top-token count equal (the tool built
    from the engine's own vendored llama.cpp by scripts/build_llama_tools.sh, as the bootstrap and CI do)."""
    from harness import kld_tools as kld_bench

    bin_dir = tools_dir()
    assert (bin_dir / "llama-perplexity").is_file(), f"run scripts/build_llama_tools.sh: {bin_dir} has no tools"
    found = kld_bench.rows(models, SMALL, bin_dir, window=W, windows=N, quants=["Q8_0", "Q4_K_M"])
    compared = [r for r in found if r.get("tool")]
    assert {r["quant"] for r in compared} == {"Q8_0", "Q4_K_M"}
    for r in compared:
        assert kld_bench.agrees(r["kld_mean"], r["tool"]["kld_mean"]), r  # 1 %, or the 6 decimals it prints
        assert r["tool"]["same_top_count"] == r["same_top_count"], r
        assert kld_bench.agrees(r["kld_p99"], r["tool"]["kld_p99"]), r


def test_a_model_added_by_hand_gets_the_quantization_matrix_without_code(tmp_path, models_dir):
    """The user's journey on a held-out model: `models add` (a GGUF and an MLX folder), `models quantize`, the
    matrix sweep run embedded, the table printed and the frontier plot written."""
    from tests.cli_support import sb

    env = {"SILICONBENCH_MODELS_DIR": str(tmp_path / "models"), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    src = models_dir / SMALL
    add = sb("models", "add", "held-out", str(src / f"gguf/{SMALL}-F32.gguf"), str(src / "mlx-f32"), env=env)
    assert add.returncode == 0, add.stderr + add.stdout
    q = sb("models", "quantize", "held-out", "--gguf", "Q4_K_M,Q4_0", "--mlx", "4", env=env)
    assert q.returncode == 0, q.stderr + q.stdout
    sweep = tmp_path / "matrix.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {
                "name": "held-out-matrix",
                "models": ["held-out"],
                "quantizations": ["all"],
                "repetitions": 1,
                "warmup": 0,
                "workloads": [
                    {"kind": "perplexity", "kl_divergence": True, "window_tokens": W, "windows": N},
                    {"kind": "generate", "prompt_tokens": [16], "gen_tokens": [4], "depth": [0]},
                ],
            }
        )
    )
    run = sb("run", str(sweep), env=env)
    assert run.returncode == 0, run.stderr + run.stdout
    out = run.stdout
    assert "held-out: every format, by speed, size and closeness to full precision" in out.replace("\n", " ")
    for fmt in ("F32 (llama.cpp)", "Q4_K_M (llama.cpp)", "Q4_0 (llama.cpp)", "MLX 4-bit (group 64)"):
        assert fmt in out, fmt
    assert "◆" in out and "KLD vs F32 (GGUF)" in out and "KLD vs f32 (MLX)" in out
    plot = tmp_path / "frontier.html"
    res = sb("results", "--plot", str(plot), env=env)
    assert res.returncode == 0, res.stderr
    assert "vega" in plot.read_text() and "mean KLD" in plot.read_text()
