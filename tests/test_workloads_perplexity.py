"""The perplexity workload on both real engines: the same token windows, one model's precisions, file sizes."""

from __future__ import annotations

import math

import pytest

from siliconbench.manifest import ModelCatalog

from .conftest import SMALL
from .workload_helpers import jobs_for, run, values


def test_perplexity_same_windows_both_engines(models_dir):
    jobs = jobs_for(models_dir, {"kind": "perplexity", "window_tokens": 64, "windows": 3},
                    quantizations=["full", "q8", "q4"])
    results = {}
    manifest = ModelCatalog(models_dir).get(SMALL)
    for job in jobs:
        res, _ = run(job, models_dir)
        assert res.status == "ok", (res.error, res.stderr_tail)
        results[(job.engine, job.quant_level)] = (job, res)
        nll = values(res, "window_nll")
        ppl, = values(res, "perplexity")
        assert len(nll) == 3 and ppl == pytest.approx(math.exp(sum(nll) / 3), rel=1e-9)  # equal windows
        size, = values(res, "file_size_bytes")
        assert size == next(a.size_bytes for a in manifest.artifacts if a.path in job.artifact)
        assert res.extra["scored_tokens"] == 3 * 63
    digests = {res.extra["tokens_sha256"] for _, res in results.values()}
    assert len(digests) == 1  # both engines scored the same token ids
    llama, mlx = (values(results[(e, "full")][1], "perplexity")[0] for e in ("llama.cpp", "mlx"))
    assert llama == pytest.approx(mlx, rel=0.02)  # F16 and float32 of one model: the same quality
    labels = {res.extra["format"] for _, res in results.values()}
    assert {"F16 (llama.cpp)", "Q8_0 (llama.cpp)", "Q4_K_M (llama.cpp)", "MLX 4-bit (group 64)"} <= labels


def test_perplexity_text_too_short_is_a_failed_job(models_dir):
    job, = jobs_for(models_dir, {"kind": "perplexity", "window_tokens": 512, "windows": 10_000}, engines=["llama.cpp"])
    res, _ = run(job, models_dir)
    assert res.status == "failed" and "tokens with this tokenizer" in res.error

