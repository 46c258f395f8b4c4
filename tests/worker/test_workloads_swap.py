"""The swap workload on both real engines: timed parts within the total, page-cache state measured, mmap on/off.

No speed is asserted: these machines are shared and noisy."""

from __future__ import annotations

import subprocess
import sys

from siliconbench.coordinator.reports.export import result_record
from siliconbench.worker.measure import pagecache
from siliconbench.worker.workloads.swap import WARM_MIN_RESIDENT
from tests.workload_helpers import jobs_for, run


def test_swap_parts_cache_state_and_mmap(models_dir):
    jobs = jobs_for(
        models_dir,
        {"kind": "swap", "to_quant": "q4", "cache": ["cold", "warm"], "mmap": [True, False], "prompt_tokens": 16},
    )
    assert sorted((j.engine, j.params["cache"], j.params["mmap"]) for j in jobs) == [
        ("llama.cpp", "cold", False),
        ("llama.cpp", "cold", True),
        ("llama.cpp", "warm", False),
        ("llama.cpp", "warm", True),
        ("mlx", "cold", None),
        ("mlx", "warm", None),
    ]
    evicts = _eviction_works(models_dir / jobs[0].params["to_artifact"])
    for job in jobs:
        res, events = run(job, models_dir)
        assert res.status == "ok", (job.label(), res.error, res.stderr_tail)
        assert len(res.samples) == 2
        for s in res.samples:
            v = s.values
            parts = v["swap_unload_s"] + v["swap_load_s"] + v["swap_first_token_ms"] / 1000
            assert 0 < parts <= v["swap_total_s"] * 1.001 + 1e-4
            assert v["swap_rss_after_unload_bytes"] > 0
            cached = v["page_cache_resident_fraction"]
            if job.params["cache"] == "warm":
                assert WARM_MIN_RESIDENT <= cached <= 1.0  # a busy host may evict a few pages
            elif evicts:
                assert cached < 0.5  # measured, not assumed: the fadvise took
        assert res.extra["mmap"] == job.params["mmap"] and res.extra["cache_requested"] == job.params["cache"]
        assert result_record(job, res)["metrics"]["swap_total_s"]["count"] == 2


def _eviction_works(path) -> bool:
    """Whether this filesystem drops pages on POSIX_FADV_DONTNEED (tmpfs, for one, cannot)."""
    pagecache.warm(path)
    pagecache.evict(path)
    return pagecache.resident_fraction(path) < 0.5


def test_a_cold_swap_that_cannot_evict_fails_with_the_reason(models_dir):
    """Another process maps B's pages (as a second engine would): eviction cannot drop them, so the job fails
    instead of storing a warm load as cold."""
    job = next(
        j
        for j in jobs_for(
            models_dir, {"kind": "swap", "to_quant": "q4", "cache": ["cold"], "mmap": [True], "prompt_tokens": 16}
        )
        if j.engine == "llama.cpp"
    )
    b = models_dir / job.params["to_artifact"]
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(b)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "mapped"
        res, _ = run(job, models_dir)
    finally:
        holder.kill()  # by the PID this test started
        holder.wait()
    assert res.status == "failed" and "cache: cold" in res.error and "still in the page cache" in res.error, res.error
    assert not res.samples


# Map the file shared, touch every page, say so, then hold the mapping until killed.
HOLD = """import mmap, sys, time
f = open(sys.argv[1], "rb"); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
sum(m[i] for i in range(0, len(m), mmap.PAGESIZE)); print("mapped", flush=True); time.sleep(600)"""
