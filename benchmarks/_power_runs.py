"""The runs of benchmarks/regression_power.py: rounds of real jobs (A, A' and a throttled B), each a fresh child
process, in a rotating order, with how busy the machine was meanwhile."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from rich.console import Console

from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.metrics import HEADLINE
from siliconbench.contract.settings import load_settings
from siliconbench.contract.spec import parse_sweep

from siliconbench.worker.job.child import run_in_child

MODEL = "tiny-llama-5m"
THROTTLE_DIR = Path(__file__).resolve().parent.parent / "harness" / "throttle"
DRAWS = 2000
CLK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_busy() -> tuple[int, int] | None:
    """(busy, total) CPU ticks of the whole machine since boot (Linux), to say how loaded it was."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    return sum(v[:3]) + sum(v[5:8]), sum(v[:8])


def own_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def models_folder(given: Path | None) -> Path:
    mdir = given or load_settings().resolved_models_dir
    if (mdir / MODEL / "manifest.json").exists():
        return mdir
    from siliconbench.worker.models.make.tiny import make_tiny

    mdir = Path(tempfile.mkdtemp(prefix="sb-power-models-"))
    make_tiny(mdir, name=MODEL, hidden_size=256, n_layers=4, n_heads=4, n_kv_heads=2, seed=0)
    return mdir


def run(job, mdir: Path, throttle: float) -> dict[str, list[float]]:
    saved = {k: os.environ.get(k) for k in ("SILICONBENCH_THROTTLE", "PYTHONPATH")}
    try:
        if throttle:
            os.environ["SILICONBENCH_THROTTLE"] = repr(throttle)
            os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(THROTTLE_DIR), saved["PYTHONPATH"]) if p)
        res = run_in_child(job, mdir)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if res.status != "ok":
        raise SystemExit(f"job failed: {res.error}\n{res.stderr_tail}")
    return {m: res.measured(m) for m in HEADLINE}


def collect(
    rounds: int,
    repetitions: int,
    threads: int,
    slowdown: float,
    prompt: int,
    gen: int,
    models_dir: Path | None,
    console: Console,
) -> dict:
    mdir = models_folder(models_dir)
    spec = parse_sweep(
        {
            "name": "regression-power",
            "models": [MODEL],
            "engines": ["llama.cpp"],
            "repetitions": repetitions,
            "warmup": 1,
            "engine_options": {"threads": threads or None},
            "workloads": [{"kind": "generate", "prompt_tokens": [prompt], "gen_tokens": [gen]}],
        }
    )
    job = expand(spec, ModelCatalog(mdir))[0]
    factor = 1.0 / (1.0 - slowdown) - 1.0  # each timed call takes (1 + factor) x as long
    t0 = time.perf_counter()
    busy0, own0 = machine_busy(), own_cpu()
    run(job, mdir, 0.0)  # the first job after start-up is slow (page cache, CPU frequency): not counted
    sides: dict[str, list] = {"A": [], "A2": [], "B": []}
    orders = [("A", "A2", "B"), ("B", "A", "A2"), ("A2", "B", "A")]  # rotate: no position is always first
    for r in range(rounds):
        for name in orders[r % 3]:
            sides[name].append(run(job, mdir, factor if name == "B" else 0.0))
        if (r + 1) % 10 == 0:
            console.print(f"round {r + 1}/{rounds} ({time.perf_counter() - t0:.0f} s)", style="dim")
    others = None
    if busy0 is not None:
        busy1, own1 = machine_busy(), own_cpu()
        others = max(0.0, (busy1[0] - busy0[0]) / CLK - (own1 - own0)) / ((busy1[1] - busy0[1]) / CLK)
    return {
        "rounds": rounds,
        "repetitions": repetitions,
        "threads": threads,
        "slowdown": slowdown,
        "prompt": prompt,
        "gen": gen,
        "wall_s": time.perf_counter() - t0,
        "others_cpu_share": others,
        "sides": sides,
    }
