"""The concurrent workload: N streaming clients against the engines' real servers (127.0.0.1); a port in use.

Every test checks that the servers it caused are gone afterwards, by the process groups the job announced."""

from __future__ import annotations

import socket
import sys

import pytest

from coordinator.export import result_record

from .workload_helpers import assert_no_process_left, jobs_for, run, values


@pytest.mark.parametrize("engine", ["llama.cpp", "mlx"])
def test_concurrent(models_dir, engine):
    jobs = jobs_for(models_dir, {"kind": "concurrent", "clients": [1, 3], "prompt_tokens": 24, "gen_tokens": 6},
                    engines=[engine], repetitions=2, warmup=0)
    for job in jobs:
        n = job.params["clients"]
        res, events = run(job, models_dir)
        assert res.status == "ok", (res.error, res.stderr_tail)
        assert_no_process_left(events)
        assert len(values(res, "request_ttft_ms")) == len(values(res, "request_e2e_ms")) == 2 * n
        # 6 tokens: 5 gaps per request, fewer where mlx_lm streams two tokens in one chunk (split UTF-8)
        gaps = len(values(res, "request_itl_ms"))
        assert gaps == 2 * n * 5 if engine == "llama.cpp" else 0 < gaps <= 2 * n * 5
        assert values(res, "request_errors") == [0.0, 0.0]
        assert all(e >= t > 0 for t, e in zip(values(res, "request_ttft_ms"), values(res, "request_e2e_ms")))
        assert all(v > 0 for v in values(res, "aggregate_output_tps"))
        peaks = values(res, "server_peak_rss_bytes")
        assert len(peaks) == 2 and all(p > 20 * 2**20 for p in peaks)
        if sys.platform.startswith("linux") and res.extra["hwm_supported"]:
            # the kernel's exact high-water mark: sampling every 10 ms caught the peak within a few percent
            for sampled, exact in zip(peaks, values(res, "server_hwm_rss_bytes")):
                assert 0.95 * exact <= sampled <= 1.02 * exact
        rec = result_record(job, res)
        assert rec["params"]["clients"] == n and set(rec["metrics"]) >= {"request_ttft_ms", "request_itl_ms"}
        assert rec["metrics"]["request_itl_ms"]["p90"] >= rec["metrics"]["request_itl_ms"]["median"]


def test_port_in_use_is_a_failed_job(models_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        job, = jobs_for(models_dir, {"kind": "concurrent", "clients": [1], "port": port}, engines=["llama.cpp"])
        res, events = run(job, models_dir)
    assert res.status == "failed"
    assert f"port {port}" in res.error and "in use" in res.error and res.error.startswith("concurrent error")
    assert not [e for e in events if e["event"] == "spawned"]  # refused before starting anything

