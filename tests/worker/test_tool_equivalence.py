"""The registry's equivalence claims, kept true by running both sides: siliconbench's generate job and the
engines' own tools (llama-bench built from the vendored llama.cpp, mlx_lm.benchmark) on the same file.

Counts are checked exactly (the regions hold the same evaluations); speeds only within a wide band, because
a 2-core VM varies ±20% run to run: benchmarks/fidelity.py measures the ratio with a confidence interval.
"""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import time

import psutil
import pytest

from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.metrics import get
from siliconbench.contract.spec import parse_sweep

from harness import tools as _tools
from siliconbench.worker.engines.llama_cpp import LlamaCppEngine
from siliconbench.worker.job.child import child_env, run_in_child
from siliconbench.worker.platform.threads import performance_cores
from siliconbench.worker.workloads.generate import repetition_ids
from tests.conftest import SMALL

# Our figures beside the tools' within a band: nothing else may run then.
solo = pytest.mark.solo

P, G = 64, 32


@pytest.fixture(scope="module")
def tools_bin():
    return _tools.llama_tools_bin()  # built by the bootstrap; builds here only on a machine that skipped it


def _jobs(models_dir, **extra):
    spec = parse_sweep(
        {
            "name": "equiv",
            "models": [SMALL],
            "quantizations": ["F16", "f32"],
            "repetitions": 3,
            "workloads": [{"kind": "generate", "prompt_tokens": [P], "gen_tokens": [G]}],
            **extra,
        }
    )
    return {j.engine: j for j in expand(spec, ModelCatalog(models_dir))}


def test_registry_states_the_tool_terms():
    assert "ppN @ dD" in get("prefill_tps").region
    assert "tgM @ d(D+N)" in get("decode_tps").region
    assert "(G-1)/G" in get("decode_tps").region
    assert "prompt_tps" in get("ttft_ms").region


def test_llama_cpp_regions_hold_what_llama_bench_times(models_dir):
    """decode_tps at pN gM = tgM @ dN: after prefill, exactly M single-token llama_decode calls at positions
    N..N+M-1; prefill is exactly the N prompt tokens (the engine's own counters say so)."""
    job = _jobs(models_dir)["llama.cpp"]
    engine = LlamaCppEngine()
    engine.load(models_dir / job.artifact, job.engine_options, P + G + 8)
    _, prompt = repetition_ids(engine, job, 0)
    engine.reset()
    first = engine.first_token(engine.prefill(prompt))
    perf = engine.lib.llama_perf_context(engine.ctx)
    assert perf.n_p_eval == P
    lib = engine.lib
    assert lib.llama_memory_seq_pos_max(lib.llama_get_memory(engine.ctx), 0) == P - 1  # depth N for decode
    engine.decode(first, G)
    perf = engine.lib.llama_perf_context(engine.ctx)
    assert perf.n_eval == G and perf.n_p_eval == P
    assert lib.llama_memory_seq_pos_max(lib.llama_get_memory(engine.ctx), 0) == P + G - 1
    # llama-bench's defaults: physical cores for both thread pools, flash attention auto (resolved and recorded)
    opts = engine.describe()["engine_options"]
    assert opts["threads"] == opts["threads_batch"] == performance_cores()
    assert opts["flash_attn"] == "auto" and opts["flash_attn_effective"] in ("enabled", "disabled")
    engine.close()


@solo
def test_llama_cpp_figures_sit_next_to_llama_bench(models_dir, tools_bin):
    job = _jobs(models_dir)["llama.cpp"]
    gguf = models_dir / job.artifact
    ratios = []
    # Two rounds, each ours then llama-bench's: a bound of 2x is a sanity check, not a fidelity one (fidelity.py is),
    # and one round beside a straggler of the previous solo test read 0.34 once; the better round is judged.
    for _ in range(2):
        res = run_in_child(job, models_dir)
        assert res.status == "ok", res.error
        pp = _tools.llama_bench(tools_bin, gguf, n_prompt=P, n_gen=0, depth=0, reps=3)
        tg = _tools.llama_bench(tools_bin, gguf, n_prompt=0, n_gen=G, depth=P, reps=3)
        ours_pp, ours_tg = statistics.median(res.measured("prefill_tps")), statistics.median(res.measured("decode_tps"))
        ratios.append((ours_pp / statistics.median(pp), ours_tg / statistics.median(tg)))
        if all(0.5 < r < 2.0 for r in ratios[-1]):
            break
    assert any(all(0.5 < r < 2.0 for r in pair) for pair in ratios), ratios


@solo
def test_mlx_figures_sit_next_to_mlx_lm_benchmark(models_dir):
    # Five a side: a 64-token prompt takes ~20 ms here, and mlx_lm.benchmark's first trial after its warm-up was the
    # slowest of its three in each of six runs, so three a side once put the medians 2.4x apart.
    job = _jobs(models_dir, repetitions=5)["mlx"]
    res = run_in_child(job, models_dir)
    assert res.status == "ok", res.error
    tool = _tools.mlx_benchmark(models_dir / job.artifact, n_prompt=P, n_gen=G, reps=5, env=child_env(job, models_dir))
    prompt_tps = statistics.median(P / (t / 1000.0) for t in res.measured("ttft_ms"))
    assert 0.5 < prompt_tps / statistics.median(tool["prompt_tps"]) < 2.0
    assert 0.5 < statistics.median(res.measured("decode_tps")) / statistics.median(tool["decode_steps_tps"]) < 2.0


def test_fidelity_stopped_takes_its_tool_with_it(models_dir, tools_bin):
    """SIGTERM to benchmarks/fidelity.py (by the PID we started) while llama-bench runs: llama-bench goes too.
    The tool runs first in fidelity's first round, so it is caught within seconds."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "benchmarks/fidelity.py",
            "--models",
            SMALL,
            "--rounds",
            "2",
            "--reps",
            "200",
            "--gen",
            "256",
            "--no-perplexity",
            "--engines",
            "llama.cpp",
            "--models-dir",
            str(models_dir),
        ],
        cwd=_tools.ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        tool = None
        deadline = time.monotonic() + 120
        while tool is None and time.monotonic() < deadline and proc.poll() is None:
            tool = next((c for c in psutil.Process(proc.pid).children() if c.name() == "llama-bench"), None)
            time.sleep(0.05)
        assert tool is not None, "llama-bench never started"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 128 + signal.SIGTERM
        gone, alive = psutil.wait_procs([tool], timeout=10)
        assert not alive, f"llama-bench {tool.pid} outlived fidelity.py"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
