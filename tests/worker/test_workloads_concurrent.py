"""The concurrent workload: N streaming clients against the engines' real servers (127.0.0.1); a port in use;
mlx_lm.server batching three clients (their streams overlap) and the result saying so.

Every test checks that the servers it caused are gone afterwards, by the process groups the job announced."""

from __future__ import annotations

import socket
import sys

import pytest

from siliconbench.coordinator.reports.export import result_record
from siliconbench.coordinator.reports.workload_tables import streams_at_once
from siliconbench.worker.serving.client import StreamResult
from siliconbench.worker.workloads.concurrent import overlap
from tests.workload_helpers import assert_no_process_left, jobs_for, run, values


@pytest.mark.solo  # streams in flight are read from the client's chunk times, which a loaded machine delays
@pytest.mark.parametrize(
    "engine,server", [("llama.cpp", "llama-server"), ("llama.cpp", "llama_cpp.server"), ("mlx", "mlx_lm.server")]
)
def test_concurrent(models_dir, engine, server):
    jobs = jobs_for(
        models_dir,
        {"kind": "concurrent", "clients": [1, 3], "prompt_tokens": 24, "gen_tokens": 6}
        | ({"server": server} if engine == "llama.cpp" else {}),
        engines=[engine],
        repetitions=2,
        warmup=0,
    )
    assert [j.params["clients"] for j in jobs] == [1, 3]
    # llama-cpp-python's server (and MLX's only one) are named in no job: the ids their history has
    assert all(j.params.get("server") == (server if server == "llama-server" else None) for j in jobs)
    for job in jobs:
        n = job.params["clients"]
        res, events = run(job, models_dir)
        assert res.status == "ok", (res.error, res.stderr_tail)
        assert_no_process_left(events)
        assert len(values(res, "request_ttft_ms")) == len(values(res, "request_e2e_ms")) == 2 * n
        # 6 tokens: 5 gaps per request, fewer where mlx_lm.server or llama-server streams two tokens in one
        # chunk (they hold back a token that ends inside a UTF-8 character)
        gaps = len(values(res, "request_itl_ms"))
        assert gaps == 2 * n * 5 if server == "llama_cpp.server" else 0 < gaps <= 2 * n * 5
        assert values(res, "request_errors") == [0.0, 0.0]
        assert all(
            e >= t > 0 for t, e in zip(values(res, "request_ttft_ms"), values(res, "request_e2e_ms"), strict=True)
        )
        assert all(v > 0 for v in values(res, "aggregate_output_tps"))
        peaks = values(res, "server_peak_rss_bytes")
        assert len(peaks) == 2 and all(p > 20 * 2**20 for p in peaks)
        if sys.platform.startswith("linux") and res.extra["hwm_supported"]:
            # the kernel's exact high-water mark: sampling every 10 ms caught the peak within a few percent
            for sampled, exact in zip(peaks, values(res, "server_hwm_rss_bytes"), strict=True):
                assert 0.95 * exact <= sampled <= 1.02 * exact
        # identical bodies: no seed, greedy, penalties off; counts from the server, not from chunks
        req = res.extra["request"]
        assert "seed" not in req and "prompt" not in req and req["temperature"] == 0.0
        assert req["repeat_penalty"] == 1.0 and req["repetition_penalty"] == 0.0 and req["top_p"] == 1.0
        source = "finish_length" if server == "llama_cpp.server" else "usage"
        assert res.extra["token_count_source"] == {source: 2 * n}
        assert res.extra["server"] == server
        # slots only where the server has them (llama-server's --parallel); the others record none
        assert res.extra.get("slots") == (n if server == "llama-server" else None)
        batching, seen = res.extra["batching"], res.extra["observed"]
        if server == "llama_cpp.server":  # one request at a time: never two streams at once
            assert batching["batches"] is False and batching["max_batch"] == 1
            assert seen["max_streams_in_flight"] == 1 and seen["joined_fraction"] in (None, 0.0)
        elif server == "llama-server":  # a slot per client, decoded in one batch
            assert batching["batches"] is True and batching["max_batch"] == batching["slots"] == n
            assert "--parallel" in res.extra["server_args"]
        else:
            assert batching["batches"] is True and batching["max_batch"] == n
            assert batching["decode_concurrency"] >= 1 and batching["prompt_concurrency"] >= 1
        rec = result_record(job, res)
        assert rec["params"]["clients"] == n and set(rec["metrics"]) >= {"request_ttft_ms", "request_itl_ms"}
        assert rec["metrics"]["request_itl_ms"]["p90"] >= rec["metrics"]["request_itl_ms"]["median"]


def test_port_in_use_is_a_failed_job(models_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        (job,) = jobs_for(models_dir, {"kind": "concurrent", "clients": [1], "port": port}, engines=["llama.cpp"])
        res, events = run(job, models_dir)
    assert res.status == "failed"
    assert f"port {port}" in res.error and "in use" in res.error and res.error.startswith("concurrent error")
    assert not [e for e in events if e["event"] == "spawned"]  # refused before starting anything


def test_mlx_server_batches_three_clients(models_dir):
    """Three clients at once against mlx_lm.server (no seed in the requests): the 2nd and 3rd first token
    arrive before the 1st stream ends, and the result records that the server batched."""
    # 400 tokens: every stream must outlast mlx_lm.server's 0.5 s time slice, after which a late request joins
    # the batch (with 160 the 5M model finished two streams in 460 ms, before the third joined)
    (job,) = jobs_for(
        models_dir,
        {"kind": "concurrent", "clients": [3], "prompt_tokens": 24, "gen_tokens": 400},
        engines=["mlx"],
        repetitions=2,
        warmup=1,
    )
    res, events = run(job, models_dir)
    assert res.status == "ok", (res.error, res.stderr_tail)
    assert_no_process_left(events)
    ttft, e2e = values(res, "request_ttft_ms"), values(res, "request_e2e_ms")
    assert len(ttft) == len(e2e) == 6 and values(res, "request_errors") == [0.0, 0.0]
    for b in range(2):  # per burst (sent together, barrier): every first token before any stream's end
        first, ends = ttft[3 * b : 3 * b + 3], e2e[3 * b : 3 * b + 3]
        assert max(first) < min(ends), (first, ends)
    seen = res.extra["observed"]
    assert seen["batched"] is True and seen["max_streams_in_flight"] == 3 and seen["joined_fraction"] == 1.0
    assert [b["in_flight"] for b in seen["per_burst"]] == [3, 3]
    assert res.extra["batching"]["batches"] is True and res.extra["batching"]["max_batch"] == 3
    assert "seed" not in res.extra["request"] and res.extra["token_count_source"] == {
        "usage": 9
    }  # warm-up burst included
    bursts = [e for e in events if e["event"] == "burst"]
    assert len(bursts) == 3 and all(e["in_flight"] == 3 for e in bursts)  # the warm-up burst too
    rec = result_record(job, res)
    assert rec["extra"]["observed"]["max_streams_in_flight"] == 3
    assert streams_at_once(rec).startswith("3 (batch ≤ ")


def test_overlap_of_serial_and_batched_streams():
    """The overlap facts from stream timings: served one after another vs all at once."""

    def stream(first, last):
        return StreamResult(t_sent=0.0, ok=True, token_times=[first, (first + last) / 2, last])

    serial = overlap([stream(1, 2), stream(2, 3), stream(3.5, 4)])  # touching is not overlapping
    assert serial == {"in_flight": 1, "joined": 0.0}
    batched = overlap([stream(0.1, 3), stream(0.7, 3.1), stream(0.7, 3.1)])
    assert batched == {"in_flight": 3, "joined": 1.0}
    late = overlap([stream(0.1, 1), stream(0.5, 2), stream(2.5, 3)])
    assert late == {"in_flight": 2, "joined": 0.5}
    assert overlap([stream(0.1, 1)]) == {"in_flight": 1, "joined": None}
    assert overlap([StreamResult(t_sent=0.0)]) == {"in_flight": 0, "joined": None}
