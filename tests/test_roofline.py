"""The roofline beside decode: bytes per token, the bandwidth used (published or probed), the percentage,
on both real engines with the tiny model."""

from __future__ import annotations

import math

import pytest

from coordinator.placement import kv_cache_bytes
from siliconbench.manifest import ModelCatalog
from worker import roofline
from worker.child import run_job

from .workload_helpers import jobs_for


def test_published_bandwidth_by_chip_and_binned_gpu():
    assert roofline.published_gbs("Apple M4 Pro", 16) == roofline.published_gbs("Apple M4 Pro", 20) == 273
    assert (roofline.published_gbs("Apple M3 Max", 30), roofline.published_gbs("Apple M3 Max", 40)) == (300, 400)
    assert roofline.published_gbs("Apple M4 Max", 32) is None  # no sourced figure: the probe decides
    assert roofline.published_gbs("Intel(R) Xeon(R) Processor", None) is None


def test_kv_bytes_agree_with_placements_kv_estimate(models_dir):
    m = ModelCatalog(models_dir).get(jobs_for(models_dir, {"kind": "generate"})[0].model)
    assert roofline.kv_bytes_per_token(m, 1000, "f16") == kv_cache_bytes(m, 1000, 2)
    assert roofline.kv_bytes_per_token(m, 1000, "f32") == 2 * kv_cache_bytes(m, 1000, 2)


@pytest.mark.parametrize("engine", ["llama.cpp", "mlx"])
def test_every_decode_repetition_carries_its_share_of_the_bandwidth(models_dir, isolated_env, engine):
    job = next(j for j in jobs_for(models_dir, {"kind": "generate", "prompt_tokens": [64], "gen_tokens": [16],
                                                "depth": [0]}) if j.engine == engine)
    res = run_job(job, models_dir)
    assert res.status == "ok", res.error
    rec = res.extra["roofline"]
    assert rec["bandwidth_source"] == "measured" and rec["bandwidth_gbs"] == rec["measured_gbs"] > 0
    assert rec["weights_bytes"] == roofline.weight_bytes(models_dir / job.artifact) > 0
    assert rec["bytes_per_token"] == rec["weights_bytes"] + rec["kv_bytes_per_token"]
    for s in res.samples:
        want = 100 * s.values["decode_tps"] * rec["bytes_per_token"] / (rec["bandwidth_gbs"] * 1e9)
        assert math.isclose(s.values["decode_bandwidth_pct"], want, rel_tol=1e-9)
        assert 0 < s.values["decode_bandwidth_pct"] < 1000  # a ceiling, not a law: caches can beat DRAM
