"""Every script under benchmarks/ at its smallest size: its command keeps working and prints the figures it claims,
so a figure the docs quote can always be measured again by its own command. Not a measurement: the suite's other
workers share the machine, so only the shape of what is printed is checked, never a value against a target.

A new benchmark without a smoke run here fails ``test_every_benchmark_has_a_smoke_run``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from harness.fleet import ROOT
from harness.llama_repo import BUILDS
from tests.conftest import SMALL

SMOKE_TIMEOUT_S = 600
# Scripts a test of their own area already runs at a small size, checking its figures: not run twice.
SMOKED_ELSEWHERE = {"faults": "tests/fleet/test_faults.py"}


def run_benchmark(script: str, *args, env: dict | None = None, timeout: float = SMOKE_TIMEOUT_S) -> str:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "240", "SILICONBENCH_BUSY_CPU_PCT": "100", **(env or {})},
    )
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])
    return out.stdout


@pytest.fixture
def models_env(models_dir, tmp_path):
    return {"SILICONBENCH_MODELS_DIR": str(models_dir), "XDG_DATA_HOME": str(tmp_path / "data")}


def test_bisection_power(tmp_path):
    out = run_benchmark(
        "bisection_power.py",
        *("--searches", 4, "--cvs", "0.08", "--ranges", 4, "--effects", "0,0.1", "--plants", "slide,skipped"),
        *("--decide-runs", 10, "--workers", 1),
    )
    assert "| cv 8% |   4 commits | step 10%" in out and "ms/search" in out
    assert "decide alone" in out and "targets:" in out
    assert out.count("PASS") + out.count("FAIL") == 4


def test_dashboard_queries():
    out = run_benchmark("dashboard_queries.py", "--samples", 3000, "--runs", 3)
    assert re.search(r"seeded [\d,]+ samples, [\d,]+ jobs, \d+ sweeps in [\d.]+ s \(revision 0\d+", out), out
    pages = re.findall(r"^PAGE (\w+) .*?\s([\d.]+)\s+([\d.]+)$", out, re.M)
    assert [p[0] for p in pages] == ["compare", "sweeps", "fleet", "result"], out
    assert "compare: series (latest sweep, default) [3/3]" in out  # the summaries' query planned on seeded rows


def test_models_add(smol):
    gguf = next((smol[0] / "smollm2-135m").rglob("*.gguf"))
    out = run_benchmark("models_add.py", gguf, "--rounds", 1)
    assert gguf.name in out and "first add (hashes)" in out and re.search(r"\d+\.\d{3} \(", out), out


def test_fidelity(models_env):
    out = run_benchmark(
        "fidelity.py",
        *("--models", SMALL, "--rounds", 1, "--reps", 2, "--prompt", 32, "--gen", 8, "--no-perplexity"),
        env=models_env,
    )
    for pair in ("prefill_tps", "decode_tps"):
        assert pair in out, out
    assert "llama-bench" in out and "mlx_lm" in out, out


def test_kld(models_env):
    out = run_benchmark(
        "kld.py", SMALL, 64, 4, "Q8_0", env=models_env
    )  # under 4 windows llama-perplexity prints no summary
    assert re.search(r"Q8_0 \(llama.cpp\) .* (yes|NO) ", out), out
    few = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "kld.py"), SMALL, "64", "2"], capture_output=True, text=True
    )
    assert few.returncode != 0 and "error in WINDOWS" in few.stderr, few.stderr  # refused before any tool runs


def test_regression_power(models_dir, tmp_path):
    out = run_benchmark(
        "regression_power.py",
        *("--rounds", 2, "--processes", 1, "--repetitions", 2, "--prompt", 16, "--gen", 4),
        *("--models-dir", models_dir, "--json", tmp_path / "figures.json"),
        env={"XDG_DATA_HOME": str(tmp_path / "data")},
    )
    assert (tmp_path / "figures.json").stat().st_size > 0 and "A/A" in out, out


def test_build_paths(models_env):
    out = run_benchmark(
        "build_paths.py",
        *("--model", SMALL, "--rounds", 1, "--reps", 1, "--prompt", 16, "--gen", 4),
        env={**models_env, "SILICONBENCH_BUILDS_DIR": str(BUILDS)},  # the suite's kept builds: no cold build
    )
    assert "binding ÷ the build's" in out and "prefill_tps" in out and "decode_tps" in out, out


@pytest.mark.timeout(1800)
def test_serve_build(models_env):
    out = run_benchmark(
        "serve_build.py",
        *("--ref", "HEAD", "--model", SMALL, "--rounds", 1, "--requests", 2, "--max-tokens", 4, "--prompt-tokens", 16),
        env={**models_env, "SILICONBENCH_BUILDS_DIR": str(BUILDS)},  # HEAD with llama-server: the suite's kept build
        timeout=1700,  # where test_llama_builds has not built it yet on this machine: once, ~12 min cold
    )
    assert "its own llama-server" in out and "serve_ttft_ms" in out and "serve_tpot_ms" in out, out


def test_serve_client(models_env):
    out = run_benchmark(
        "serve_client.py",
        *("--model", SMALL, "--quant", "full", "--engines", "llama.cpp", "--rounds", 1, "--requests", 2),
        *("--max-tokens", 4, "--prompt-tokens", 16, "--concurrency", 1, "--server-cpus", 0),
        env=models_env,
    )
    assert "TTFT" in out and "TPOT" in out and "at most 1 in flight" in out and "server on CPU 0" in out, out


def test_convert_memory():
    out = run_benchmark("convert_memory.py", "--shape", "small")
    assert "peak RSS of the converter" in out and "bytes/parameter" in out and "largest tensor" in out, out


def test_plumbing():
    out = run_benchmark("plumbing.py", "--jobs", 20, "--workers", 1)
    assert "jobs/s" in out and "enqueue" in out, out


def test_fleet_scale(tmp_path):
    """Two real workers directly, then thirty simulated through PgBouncer: both kinds of row, every figure, the slopes
    and the plot."""
    out = run_benchmark(
        "fleet_scale.py", "--sizes", "2,30", "--real-max", 2, "--pooled-above", 2, "--jobs", 150, "--idle-s", 3,
        "--steady-s", 5, "--plot", tmp_path / "fleet.png",
    )  # fmt: skip
    assert "N=2" in out and "N=30" in out and "real" in out and "simulated, PgBouncer" in out, out
    for figure in ("PG conns / worker, idle", "Redis conns / worker", "claim p99, steady: probe (ms)", "jobs lost"):
        assert re.search(rf"{re.escape(figure)}\s*│\s*[\d.]+\s*│\s*[\d.]+", out), (figure, out)
    assert re.search(r"PG row writes/s, idle\s*│\s*-?[\d.]+", out) and "growth with N" in out
    assert (tmp_path / "fleet.png").stat().st_size > 10_000


def test_suspect_hosts(models_dir):
    out = run_benchmark(
        "suspect_hosts.py",
        *("--runs", 1, "--processes", 4, "--gen", "16", "--repetitions", 2, "--models-dir", models_dir),
    )  # 4 processes a series: the fewest suspects.MIN_PROCESSES tests
    assert re.search(r"run 1/1 .*; (ok|slow) tg16 @ d\d+ \d\.\d{3} p ", out), out
    assert re.search(r"detection: \d/1 = \d+% \(95% ", out) and "false flags: " in out, out


def test_process_cost(models_dir):
    """Both trees measured (this checkout and HEAD's worktree, removed after), each kind of process once."""
    out = run_benchmark(
        "process_cost.py", "--runs", 1, "--against", "HEAD", "--model", SMALL, "--models-dir", models_dir
    )
    figure = r"\d\.\d{3} \(one run\)"  # one run: no interval
    for kind in ("CLI: db current", "CLI: workers", "job child: generate, binding"):
        assert re.search(rf"{re.escape(kind)}\s*│\s*{figure}\s*│\s*{figure}", out), (kind, out)
    assert "HEAD" in out and "this checkout" in out
    worktrees = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True).stdout
    assert "against" not in worktrees, worktrees


def test_omp_wait(models_dir):
    """One round of each way of waiting, quiet and beside one burner, on the tiny model."""
    out = run_benchmark(
        "omp_wait.py", "--rounds", 1, "--model", SMALL, "--models-dir", models_dir, "--burners", 1, "--gen", 8
    )
    for condition in ("quiet", "beside burners"):
        for mode in ("spin (default)", "sleep (OMP_WAIT_POLICY=PASSIVE)", "one thread"):
            row = rf"{re.escape(condition)}\s*│\s*{re.escape(mode)}\s*│\s*\d+\.\d\d \(one run\)"
            assert re.search(row, out), (condition, mode, out)


def test_every_benchmark_has_a_smoke_run():
    scripts = {p.stem for p in (ROOT / "benchmarks").glob("*.py") if not p.stem.startswith("_")}
    smoked = {name.removeprefix("test_") for name in globals() if name.startswith("test_")} - {
        "every_benchmark_has_a_smoke_run",
        "benchmarks_readme_lists_every_script",
    }
    for script, where in SMOKED_ELSEWHERE.items():  # a test elsewhere runs the script itself, at a small size
        assert f"benchmarks/{script}.py" in (ROOT / where).read_text(), (script, where)
    assert scripts == smoked | set(SMOKED_ELSEWHERE), f"benchmarks without a smoke run: {sorted(scripts - smoked)}"


def test_benchmarks_readme_lists_every_script():
    text = (ROOT / "benchmarks" / "README.md").read_text()
    missing = [p.name for p in sorted((ROOT / "benchmarks").glob("*.py")) if not p.stem.startswith("_")]
    missing = [name for name in missing if f"`{name}`" not in text]
    assert not missing, missing


def test_decode_overhead(smol):
    gguf = next((smol[0] / "smollm2-135m").rglob("*F16.gguf"))
    out = run_benchmark("decode_overhead.py", gguf, "--rounds", 2, "--gen", 16)
    for loop in ("llama-bench", "numpy argmax", "greedy sampler", "siliconbench, host", "siliconbench, backend"):
        assert loop in out, out
    assert "beyond llama-bench's loop" in out and re.search(r"(PASS|FAIL)", out), out


def test_mlx_prompt_time(models_dir, models_env):
    folder = next(p.parent for p in (models_dir / SMALL).rglob("config.json") if "f32" in p.parent.name)
    out = run_benchmark("mlx_prompt_time.py", folder, "--rounds", 2, "--prompt", 16, env=models_env)
    for region in ("siliconbench ttft", "+ next step queued", "mlx_lm generate_step", "one decode step"):
        assert region in out, out
