"""The child-process runner on both real engines: results, crashes, timeouts and engine errors."""

from __future__ import annotations

import os

import pytest

from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.spec import parse_sweep

from siliconbench.worker.envs.blas import find_openblas
from siliconbench.worker.job.child import child_env, run_in_child
from siliconbench.worker.runtime.doctor.machine import probe_in_fresh_interpreter
from tests.conftest import SMALL


def jobs_for(models_dir, **kw):
    spec = parse_sweep(
        {
            "name": "child",
            "models": [SMALL],
            "repetitions": 3,
            "warmup": 1,
            "workloads": [{"kind": "generate", "prompt_tokens": [32], "gen_tokens": [8], "depth": [16]}],
            **kw,
        }
    )
    return expand(spec, ModelCatalog(models_dir))


@pytest.mark.parametrize("engine", ["llama.cpp", "mlx"])
def test_real_engine_job(models_dir, engine):
    job = next(j for j in jobs_for(models_dir) if j.engine == engine)
    events = []
    res = run_in_child(job, models_dir, on_event=events.append)
    assert res.status == "ok", (res.error, res.stderr_tail)
    kinds = [e["event"] for e in events]  # the scratch folder every workload announces comes before the load
    assert kinds[0] == "started" and kinds.index("scratch") < kinds.index("loaded") < kinds.index("repetition")
    assert sum(e["event"] == "repetition" for e in events) == 4
    assert len(res.samples) == 4 and [s.warmup for s in res.samples] == [True, False, False, False]
    for metric in ("prefill_tps", "decode_tps", "ttft_ms"):
        vals = res.measured(metric)
        assert len(vals) == 3 and all(v > 0 for v in vals)
    assert res.load_s > 0
    assert res.peak_memory_bytes > res.baseline_memory_bytes > 0
    env = res.environment
    assert env.cores >= 1 and env.memory_bytes > 0 and env.chip and env.os_version
    # the backend the job ran on is the one the engine reports on this host, in a fresh interpreter (doctor's probe):
    # CPU here, Metal on a Mac, CUDA on a GPU host
    probe, why = probe_in_fresh_interpreter(engine)
    assert probe is not None, why
    assert env.backend == probe["backend"]
    if engine == "llama.cpp":
        assert env.packages["llama-cpp-python"] == "0.3.36"
        assert env.engine_build["commit"]
        # llama.cpp's own count times llama_decode alone; the wall clock adds the host argmax and any time the
        # process waits for a core between steps, so it is never much faster (on a loaded machine it can be 2x
        # slower: the ratio on a quiet host is test_engine_counters_agree_with_the_wall_clock_on_a_quiet_host's)
        assert len(res.measured("engine_decode_tps")) == 3
        wall, own = res.summary("decode_tps").median, res.summary("engine_decode_tps").median
        assert 0 < wall / own <= 1.2
    else:
        assert set(env.packages) == {"mlx", "mlx-lm"}
        assert len(res.measured("mlx_peak_memory_bytes")) == 3
        assert env.blas


@pytest.mark.solo  # on a loaded machine the wall clock also counts the waits for a core between decode steps
def test_engine_counters_agree_with_the_wall_clock_on_a_quiet_host(models_dir):
    """Same region, finer clock: on a quiet host the wall clock's decode is within a factor of llama.cpp's own count
    (the host argmax and Python's loop are what it adds). A parallel run once read 0.43 beside three test processes
    on two cores, which says the host was busy, not that either clock is wrong."""
    job = next(j for j in jobs_for(models_dir) if j.engine == "llama.cpp")
    res = run_in_child(job, models_dir)
    assert res.status == "ok", (res.error, res.stderr_tail)
    wall, own = res.summary("decode_tps").median, res.summary("engine_decode_tps").median
    assert 0.5 < wall / own <= 1.2


def test_a_jobs_peak_memory_is_its_own_whatever_the_parent_holds(models_dir):
    """A parent holding 1.5 GiB (touched) starts the job: the child's peak must not carry it (on Linux,
    ru_maxrss inherits the parent's high-water mark across fork + exec)."""
    job = next(j for j in jobs_for(models_dir) if j.engine == "llama.cpp")
    quiet = run_in_child(job, models_dir)
    ballast = bytearray(1536 << 20)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    loaded = run_in_child(job, models_dir)
    del ballast
    assert quiet.status == loaded.status == "ok", (quiet.error, loaded.error)
    assert loaded.peak_memory_bytes < 1 << 30, loaded.peak_memory_bytes
    assert abs(loaded.peak_memory_bytes - quiet.peak_memory_bytes) < 0.2 * quiet.peak_memory_bytes


def test_a_llama_cpp_result_records_the_openmp_wait_policy_it_ran_under(models_dir, monkeypatch):
    """make test's parallel part sets OMP_WAIT_POLICY (Makefile): llama.cpp's threads then sleep at their barrier
    instead of spinning, a different speed, so such a result says so and never pools with a default one."""
    job = next(j for j in jobs_for(models_dir, repetitions=1, warmup=0) if j.engine == "llama.cpp")
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    passive = run_in_child(job, models_dir)
    monkeypatch.delenv("OMP_WAIT_POLICY")
    default = run_in_child(job, models_dir)
    assert passive.status == default.status == "ok", (passive.error, default.error)
    assert passive.environment.engine_options["openmp"] == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert "openmp" not in default.environment.engine_options
    assert passive.environment.identity() != default.environment.identity()


def test_crash_becomes_failed_result(models_dir, monkeypatch):
    monkeypatch.setenv("SILICONBENCH_FAULT", "crash")
    job = jobs_for(models_dir)[0]
    res = run_in_child(job, models_dir)
    assert res.status == "failed"
    assert "SIGABRT" in res.error
    assert res.stderr_tail is not None


def test_timeout_kills_the_child(models_dir, monkeypatch):
    monkeypatch.setenv("SILICONBENCH_FAULT", "hang")
    job = jobs_for(models_dir, timeout_s=3)[0]
    events = []
    res = run_in_child(job, models_dir, on_event=events.append)
    assert res.status == "failed" and res.error.startswith("timeout")
    assert 3 <= res.wall_s < 30
    pid = next(e["pid"] for e in events if e["event"] == "started")
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # no orphan left behind


def test_engine_error_is_reported(models_dir, tmp_path):
    job = next(j for j in jobs_for(models_dir) if j.engine == "llama.cpp")
    broken = tmp_path / "models"
    (broken / SMALL / "gguf").mkdir(parents=True)
    (broken / job.artifact).write_bytes(b"GGUF but not really")
    res = run_in_child(job, broken)
    assert res.status == "failed" and res.error.startswith("engine error")
    # what llama.cpp itself said (its log is pointed at /dev/null while it loads) travels with the error
    assert "its last log lines" in res.error and "gguf" in res.error.lower(), res.error
    assert "gguf" in (res.stderr_tail or "").lower()  # and as it came, in the child's stderr


def test_a_child_gets_no_blas_but_the_one_its_job_chooses(models_dir, monkeypatch):
    """A worker started with OpenBLAS preloaded does not pass it on: a llama.cpp child
    and a `blas: bundled` MLX child get none, an `auto` MLX child exactly the one it records; other preloads stay."""
    lib = find_openblas()
    assert lib, "Debian's OpenBLAS is installed by the bootstrap (scripts/bootstrap.sh)"
    monkeypatch.setenv("LD_PRELOAD", f"{lib} /usr/lib/libother.so")
    llama = next(j for j in jobs_for(models_dir) if j.engine == "llama.cpp")
    auto = next(j for j in jobs_for(models_dir) if j.engine == "mlx")
    bundled = next(j for j in jobs_for(models_dir, engine_options={"mlx": {"blas": "bundled"}}) if j.engine == "mlx")
    assert child_env(llama, models_dir)["LD_PRELOAD"] == "/usr/lib/libother.so"
    env = child_env(bundled, models_dir)
    assert env["LD_PRELOAD"] == "/usr/lib/libother.so" and env["SILICONBENCH_MLX_BLAS"] == "bundled reference BLAS"
    env = child_env(auto, models_dir)
    assert env["LD_PRELOAD"].split() == [lib, "/usr/lib/libother.so"] and lib in env["SILICONBENCH_MLX_BLAS"]
