"""The roofline beside decode: bytes per token, the bandwidth used (published or probed), the percentage,
on both real engines with the tiny model."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

from siliconbench.contract.manifest import ModelCatalog

from siliconbench.coordinator.fleet.placement import kv_cache_bytes
from siliconbench.worker.job.child import run_in_child
from siliconbench.worker.measure import roofline
from tests.conftest import SMALL
from tests.workload_helpers import jobs_for

pytestmark = pytest.mark.solo  # the bandwidth probe and the decode's share of it need the machine to themselves


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
    job = next(
        j
        for j in jobs_for(models_dir, {"kind": "generate", "prompt_tokens": [64], "gen_tokens": [16], "depth": [0]})
        if j.engine == engine
    )
    res = run_in_child(job, models_dir)
    assert res.status == "ok", res.error
    rec = res.extra["roofline"]
    assert rec["bandwidth_source"] == "measured" and rec["bandwidth_gbs"] == rec["measured_gbs"] > 0
    assert rec["weights_bytes"] == roofline.weight_bytes(models_dir / job.artifact) > 0
    assert rec["bytes_per_token"] == rec["weights_bytes"] + rec["kv_bytes_per_token"]
    for s in res.samples:
        want = 100 * s.values["decode_tps"] * rec["bytes_per_token"] / (rec["bandwidth_gbs"] * 1e9)
        assert math.isclose(s.values["decode_bandwidth_pct"], want, rel_tol=1e-9)
        assert 0 < s.values["decode_bandwidth_pct"] < 1000  # a ceiling, not a law: caches can beat DRAM


def _burner() -> subprocess.Popen:
    """A process that keeps every core busy (one spinning thread per core), stopped by its PID."""
    code = (
        "import multiprocessing as m\ndef spin():\n    while True: pass\nif __name__ == '__main__':\n"
        "    ps = [m.Process(target=spin) for _ in range(m.cpu_count())]\n    [p.start() for p in ps]\n"
        "    [p.join() for p in ps]\n"
    )
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def test_a_probe_taken_on_a_busy_machine_is_not_cached(tmp_path):
    cache = tmp_path / "bandwidth.json"
    burner = _burner()
    try:
        time.sleep(1.0)
        busy = roofline.probed_gbs(cache=cache)
    finally:
        os.killpg(burner.pid, signal.SIGKILL)  # the burner's own session: only what this test started
        burner.wait()
    assert busy["busy"] and busy["others_cpu_pct"] > roofline.BUSY_CPU_PCT
    assert roofline.probed_gbs(cache=cache, measure=False) == {}  # its figure is not kept
    t0 = time.perf_counter()
    assert roofline.probed_gbs(cache=cache) == {}  # and the next job's parent does not probe again at once
    assert time.perf_counter() - t0 < 0.1
    waited = json.loads(cache.read_text())
    waited["busy_at"] -= roofline.BUSY_RETRY_S + 1
    cache.write_text(json.dumps(waited))
    quiet = roofline.probed_gbs(cache=cache)  # BUSY_RETRY_S later, a job's parent probes again
    assert cache.exists() and not quiet.get("busy") and quiet["method"] == "read"
    assert quiet["measured_gbs"] > busy["measured_gbs"] * 0.8  # and usually well above it
    assert roofline.probed_gbs(cache=cache, measure=False) == quiet  # cached now


def test_processes_that_find_no_figure_together_probe_once(tmp_path):
    """Three processes (as workers started at once) ask for the bandwidth of a host with no cached figure: one
    probes, the others wait for it and take what it left (its figure, or its busy mark), never a probe of their own."""
    cache = tmp_path / "bandwidth.json"
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from siliconbench.worker.measure import roofline\n"
        "print(json.dumps(roofline.probed_gbs(cache=Path(sys.argv[1]))))\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(cache)], stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        for _ in range(3)
    ]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    probes = {o["measured_at"] for o in outs if o}  # each probe is stamped with its own time
    assert len(probes) == 1, outs
    kept = json.loads(cache.read_text())
    assert kept.get("measured_at") in probes or kept.get("busy_at")  # the one probe's figure, or its busy mark


def test_a_decode_over_the_bound_is_flagged_and_the_probe_is_taken_again(tmp_path, isolated_env):
    roofline.probed_gbs()  # cached in the isolated data dir
    assert roofline.cache_path().exists()
    rec = {"bandwidth_source": "measured", "bandwidth_gbs": 10.0}
    roofline.mark_exceeded(rec, [90.0, 130.0])
    assert rec["exceeded"] and rec["max_pct"] == 130.0 and not roofline.cache_path().exists()
    fine = {"bandwidth_source": "measured"}
    roofline.mark_exceeded(fine, [99.0])
    assert "exceeded" not in fine


def test_bytes_per_token_counts_an_untied_embedding_as_one_row(models_dir):
    from siliconbench.worker.models.facts import read_gguf_header

    m = ModelCatalog(models_dir).get(SMALL)
    f16 = models_dir / SMALL / m.artifact_for("llama.cpp", "F16").path
    tensors = {n: (shape, t) for n, shape, t in read_gguf_header(f16).tensors}
    sizes = {n: math.prod(shape) * (2 if t == 1 else 4) for n, (shape, t) in tensors.items()}
    embd = sizes["token_embd.weight"]
    if "output.weight" in sizes:  # untied: the lookup reads one row
        assert roofline.weight_bytes(f16) == sum(sizes.values()) - embd + embd // tensors["token_embd.weight"][0][-1]
    else:
        assert roofline.weight_bytes(f16) == sum(sizes.values())
    assert roofline.weight_bytes(f16) <= f16.stat().st_size
