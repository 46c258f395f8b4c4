"""The restart workload on the engines' real servers (127.0.0.1); a server that never gets ready; a killed job;
mlx_lm.server's /health answering before its model is loaded, and "ready" waiting for the model.

Every test checks that the servers it caused are gone afterwards, by the process groups the job announced."""

from __future__ import annotations

import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from siliconbench.coordinator.reports.export import result_record
from siliconbench.worker.envs.blas import child_blas_env
from siliconbench.worker.serving.client import completion_body, stream_completion
from siliconbench.worker.serving.process import READY_PROBE, Server, free_port
from siliconbench.worker.serving.servers import command
from tests.conftest import SMALL
from tests.workload_helpers import assert_no_process_left, jobs_for, run, values


@pytest.mark.parametrize("engine", ["llama.cpp", "mlx"])
def test_restart(models_dir, engine):
    (job,) = jobs_for(
        models_dir,
        # every 10 ms: llama-server stops and starts again in well under 100 ms, so a sparser client can miss the gap
        {"kind": "restart", "prompt_tokens": 16, "gen_tokens": 4, "client_interval_ms": 10},
        engines=[engine],
        repetitions=2,
        warmup=1,
    )
    res, events = run(job, models_dir)
    assert res.status == "ok", (res.error, res.stderr_tail)
    assert sum(e["event"] == "spawned" for e in events) == 3  # warmup + 2 restarts, each its own group
    assert_no_process_left(events)
    ready, first = values(res, "restart_ready_s"), values(res, "restart_first_token_s")
    assert len(ready) == len(first) == 2 and all(0 < r <= f for r, f in zip(ready, first, strict=True))
    assert all(v > 0 for v in values(res, "restart_stop_s") + values(res, "restart_warm_ttft_ms"))
    sent, failed = values(res, "restart_requests"), values(res, "restart_failed_requests")
    assert len(sent) == 2 and all(0 <= f <= s for f, s in zip(failed, sent, strict=True))
    assert sum(failed) >= 1  # the client kept sending while no server listened: those are counted
    assert res.peak_memory_bytes is None
    if engine == "mlx":
        assert res.extra["unclean_stops"] == 0
    else:
        # llama-server (this tree) at times does not exit on SIGTERM while a request sent during the stop is in
        # flight: its task loop ends, the request's handler waits on it and the HTTP server's join never returns.
        # The workload then kills it after stop_timeout_s and counts the stop unclean: a property of the server,
        # measured (stop_s says so), not hidden.
        stops = [s.values["restart_stop_s"] for s in res.samples]  # the warm-up's stop included
        unclean = res.extra["unclean_stops"]
        assert 0 <= unclean <= 3 and sum(s >= job.params["stop_timeout_s"] for s in stops) == unclean
    assert res.extra["ready_probe"] == READY_PROBE
    req = res.extra["request"]  # the same body for both servers: no seed (greedy instead), penalties off
    assert "seed" not in req and req["temperature"] == 0.0 and req["repeat_penalty"] == 1.0
    rec = result_record(job, res)
    assert rec["workload"] == "restart" and rec["metrics"]["restart_ready_s"]["count"] == 2
    assert rec["metrics"]["restart_ready_s"]["p99"] >= rec["metrics"]["restart_ready_s"]["median"]


def test_server_never_ready_is_a_failed_job(models_dir):
    # 1 ms: llama-server loads the tiny model and answers within 50 ms
    (job,) = jobs_for(models_dir, {"kind": "restart", "ready_timeout_s": 0.001}, engines=["llama.cpp"])
    res, events = run(job, models_dir)
    assert res.status == "failed" and "not ready within ready_timeout_s=0.001 s" in res.error
    assert [e for e in events if e["event"] == "spawned"]  # it was started, then torn down
    assert_no_process_left(events)
    assert res.environment is not None  # a failed job still says where it ran


def test_a_killed_job_leaves_no_server_and_no_file(models_dir, tmp_path, monkeypatch):
    """The runner's timeout kills the job's process; the server groups it announced go with it, and so do its
    scratch folder (announced too) and its stderr file (one without a name)."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))  # the job's process
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # the runner, this process
    # A second between restarts: the timeout, not the prompts, ends it on any machine (a fast one reached a
    # prompt at repetition 45 whose 8 greedy tokens stream no text from the tiny model).
    (job,) = jobs_for(
        models_dir,
        {"kind": "restart", "client_interval_ms": None},
        engines=["llama.cpp"],
        repetitions=500,
        timeout_s=4,
        delay_s=1.0,
    )
    res, events = run(job, models_dir)
    assert res.status == "failed" and res.error.startswith("timeout")
    assert [e for e in events if e["event"] == "spawned"]
    assert_no_process_left(events)
    assert [Path(e["path"]).parent for e in events if e["event"] == "scratch"] == [scratch]
    assert list(scratch.iterdir()) == []


def test_mlx_ready_means_the_model_is_loaded(models_dir, monkeypatch, tmp_path):
    """mlx_lm.server's /health answers 200 while its start-up thread still loads the model; wait_ready returns
    only once a completion is answered, so the next request pays no load."""
    for k, v in child_blas_env("auto", None).items():
        monkeypatch.setenv(k, v)
    art = models_dir / SMALL / "mlx-f32"
    assert (art / "config.json").exists()
    port = free_port()
    (job,) = jobs_for(models_dir, {"kind": "restart"}, engines=["mlx"], quantizations=["full"])
    server = Server("mlx", command(job, art, port, 256), port, tmp_path / "server.log")
    t0 = server.start()
    try:
        while True:
            assert server.proc.poll() is None and time.perf_counter() - t0 < 60, server.log_tail()
            try:
                with urllib.request.urlopen(server.url + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.005)
        health_s = time.perf_counter() - t0
        ready_s = server.wait_ready(60)
        after = stream_completion(port, completion_body("Once upon a time", 4, set()), 30)
        assert after.ok, after.error
        assert health_s <= ready_s and after.ttft_s < 0.5 * ready_s, (health_s, ready_s, after.ttft_s)
    finally:
        server.stop(5)
