"""The perplexity workload on both real engines: the same token windows, one model's precisions, file sizes;
both modes (llama-perplexity's definition, the default, and all-tokens) on both engines, and the default mode
next to the built llama-perplexity binary on the same GGUF."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.spec import load_sweep

from siliconbench.worker.models.quants.imatrix import tools_dir
from tests.conftest import SMALL
from tests.workload_helpers import jobs_for, run, values

W, N = 64, 3


def test_perplexity_same_windows_both_engines(models_dir):
    jobs = jobs_for(
        models_dir, {"kind": "perplexity", "window_tokens": W, "windows": N}, quantizations=["full", "q8", "q4"]
    )
    results = {}
    manifest = ModelCatalog(models_dir).get(SMALL)
    for job in jobs:
        assert job.params["mode"] == "llama-perplexity"  # the default
        res, _ = run(job, models_dir)
        assert res.status == "ok", (res.error, res.stderr_tail)
        results[(job.engine, job.quant_level)] = (job, res)
        nll = values(res, "window_nll")
        (ppl,) = values(res, "perplexity")
        assert len(nll) == N and ppl == pytest.approx(math.exp(sum(nll) / N), rel=1e-9)  # equal windows
        (size,) = values(res, "file_size_bytes")
        assert size == next(a.size_bytes for a in manifest.artifacts if a.path in job.artifact)
        assert res.extra["scored_tokens"] == N * (W - W // 2 - 1)  # the second half of each window
        assert res.extra["mode"] == "llama-perplexity" and res.extra["bos"] is not None  # the tiny vocab adds BOS
    digests = {res.extra["tokens_sha256"] for _, res in results.values()}
    assert len(digests) == 1  # both engines scored the same token ids, BOS included
    llama, mlx = (values(results[(e, "full")][1], "perplexity")[0] for e in ("llama.cpp", "mlx"))
    assert llama == pytest.approx(mlx, rel=0.02)  # F32 and float32 of one model: the same quality
    labels = {res.extra["format"] for _, res in results.values()}
    assert {"F32 (llama.cpp)", "Q8_0 (llama.cpp)", "Q4_K_M (llama.cpp)", "MLX 4-bit (group 64)"} <= labels


def test_both_modes_run_on_both_engines(models_dir):
    jobs = [
        j
        for m in ("llama-perplexity", "all-tokens")
        for j in jobs_for(models_dir, {"kind": "perplexity", "mode": m, "window_tokens": W, "windows": N})
    ]
    assert {(j.engine, j.params["mode"]) for j in jobs} == {
        (e, m) for e in ("llama.cpp", "mlx") for m in ("llama-perplexity", "all-tokens")
    }
    assert len({j.job_id for j in jobs}) == 4  # the mode is part of the job's identity
    out = {}
    for job in jobs:
        res, _ = run(job, models_dir)
        assert res.status == "ok", (res.error, res.stderr_tail)
        out[(job.engine, job.params["mode"])] = res
    for engine in ("llama.cpp", "mlx"):
        lp, at = out[(engine, "llama-perplexity")], out[(engine, "all-tokens")]
        assert lp.extra["scored_tokens"] == N * (W - W // 2 - 1) and lp.extra["first_scored"] == W // 2 + 1
        assert at.extra["scored_tokens"] == N * (W - 1) and at.extra["first_scored"] == 1 and at.extra["bos"] is None
        assert values(lp, "perplexity")[0] != values(at, "perplexity")[0]  # different tokens scored
    for mode in ("llama-perplexity", "all-tokens"):
        a, b = out[("llama.cpp", mode)], out[("mlx", mode)]
        assert a.extra["tokens_sha256"] == b.extra["tokens_sha256"]
        assert values(a, "perplexity")[0] == pytest.approx(values(b, "perplexity")[0], rel=0.02)


def test_llama_perplexity_mode_matches_the_tools(models_dir):
    """Ours beside llama-perplexity (same GGUF) and mlx_lm.perplexity's eval_ppl (same MLX directory): within 0.5%."""
    bin_dir = tools_dir()  # scripts/build_llama_tools.sh builds them there (the bootstrap and CI do)
    if not (bin_dir / "llama-perplexity").exists():
        pytest.skip(
            f"{bin_dir / 'llama-perplexity'} is not built: run scripts/build_llama_tools.sh "
            "(the bootstrap and CI build it)"
        )
    from harness.perplexity_tools import TARGET, perplexity_rows

    rows = perplexity_rows(models_dir, SMALL, bin_dir, window_tokens=W, windows=N)
    by = {(r["engine"], r["mode"]): r for r in rows}
    assert set(by) == {(e, m) for e in ("llama.cpp", "mlx") for m in ("llama-perplexity", "all-tokens")}
    lp = by[("llama.cpp", "llama-perplexity")]
    assert lp["tool"] == "llama-perplexity" and lp["same_artifact"]
    assert abs(lp["ratio"] - 1) <= TARGET, lp
    mx = by[("mlx", "all-tokens")]
    assert mx["tool"] == "mlx_lm.perplexity" and mx["same_artifact"] and mx["same_ids"]
    assert abs(mx["ratio"] - 1) <= TARGET, mx


def test_llama_perplexity_mode_needs_a_scored_half(models_dir):
    with pytest.raises(UserError, match="window_tokens"):
        jobs_for(models_dir, {"kind": "perplexity", "window_tokens": 3})
    assert jobs_for(models_dir, {"kind": "perplexity", "mode": "all-tokens", "window_tokens": 3, "windows": 1})


def test_perplexity_text_too_short_is_a_failed_job(models_dir):
    (job,) = jobs_for(
        models_dir, {"kind": "perplexity", "window_tokens": 512, "windows": 10_000}, engines=["llama.cpp"]
    )
    res, _ = run(job, models_dir)
    assert res.status == "failed" and "tokens with this tokenizer" in res.error


def test_a_users_own_text_is_scored_and_its_content_is_the_identity(models_dir, tmp_path):
    """`text: PATH`, as `llama-perplexity -f FILE` takes one: here the project's own code (users judge a
    quantization on theirs). Both engines score the same ids of that text; the job carries the text itself and
    its digest is its identity: the same content at another path is the same job, the corpus another."""
    code = (Path(__file__).resolve().parents[2] / "siliconbench" / "contract" / "metrics.py").read_text()
    mine = tmp_path / "mine.py"
    mine.write_text(code)
    jobs = jobs_for(models_dir, {"kind": "perplexity", "text": str(mine), "window_tokens": W, "windows": N})
    digest = hashlib.sha256(code.encode()).hexdigest()
    assert {j.params["text"] for j in jobs} == {f"sha256:{digest}"} and all(j.params["text_body"] == code for j in jobs)
    copy = tmp_path / "elsewhere" / "copy.txt"
    copy.parent.mkdir()
    copy.write_text(code)
    same = jobs_for(models_dir, {"kind": "perplexity", "text": str(copy), "window_tokens": W, "windows": N})
    corpus = jobs_for(models_dir, {"kind": "perplexity", "window_tokens": W, "windows": N})
    # the measurement's identity (what a job id digests beside its sweep), not the path it was read from
    assert [j.key() for j in same] == [j.key() for j in jobs]
    assert all(a.key() != b.key() for a, b in zip(corpus, jobs, strict=False))
    scored = {}
    for job in jobs:
        res, _ = run(job, models_dir)
        assert res.status == "ok", (res.error, res.stderr_tail)
        assert res.extra["text"] == f"sha256:{digest}" and res.extra["text_tokens"] > W * N
        scored[job.engine] = res.extra["tokens_sha256"]
    (ours,) = set(scored.values())  # both engines scored the same token ids of the user's text
    res, _ = run(next(j for j in corpus if j.engine == "llama.cpp"), models_dir)
    assert res.extra["tokens_sha256"] != ours


def test_a_users_text_is_refused_by_field_when_unreadable_and_fails_with_its_count_when_short(models_dir, tmp_path):
    def expand_with(text):
        return jobs_for(models_dir, {"kind": "perplexity", "text": text, "window_tokens": W, "windows": N})

    with pytest.raises(UserError) as e:
        expand_with(str(tmp_path / "missing.txt"))
    assert e.value.field == "workloads[0].text" and "not a file" in e.value.message
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("caf\xe9 au lait".encode("latin-1"))
    with pytest.raises(UserError, match="not UTF-8"):
        expand_with(str(latin))
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    with pytest.raises(UserError, match="empty"):
        expand_with(str(empty))
    short = tmp_path / "short.txt"
    short.write_text("Only a few words here.")
    (job,) = [j for j in expand_with(str(short)) if j.engine == "llama.cpp"]
    res, _ = run(job, models_dir)
    assert res.status == "failed" and "tokens with this tokenizer" in res.error and f"= {W * N}" in res.error


def test_a_sweep_files_text_is_found_beside_it(tmp_path):
    (tmp_path / "my.txt").write_text("some text")
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        f"name: own\nmodels: [{SMALL}]\nworkloads:\n  - kind: perplexity\n    text: my.txt\n    window_tokens: 8\n"
    )
    (w,) = load_sweep(sweep).workloads
    assert w.text == str(tmp_path / "my.txt")
