"""Does the harness change the numbers? siliconbench vs a bare engine loop, interleaved, both engines.

    python benchmarks/fidelity.py [--model tiny-llama-30m] [--rounds 4] [--reps 5]

For each round and engine: one siliconbench job (fresh child process, via worker.child.run_job) and
one bare loop (fresh process, benchmarks/_bare_loop.py calling the engine directly), alternating so
drift hits both alike. Prints the siliconbench/bare ratio of median prefill and decode tokens/s and
the coefficient of variation of each. Target: ratio within ±2%, siliconbench's CV no worse.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from siliconbench.jobs import expand  # noqa: E402
from siliconbench.manifest import ModelCatalog  # noqa: E402
from siliconbench.settings import load_settings  # noqa: E402
from siliconbench.spec import parse_sweep  # noqa: E402
from worker.child import child_env, run_job  # noqa: E402


def cv(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.fmean(xs) if len(xs) > 1 else 0.0


def main(model: str = "tiny-llama-30m", rounds: int = 4, reps: int = 5, prompt: int = 256, gen: int = 64,
         models_dir: Path = typer.Option(None)) -> None:
    console = Console()
    mdir = models_dir or load_settings().resolved_models_dir
    spec = parse_sweep({"name": "fidelity", "models": [model], "repetitions": reps, "warmup": 1,
                        "workloads": [{"kind": "generate", "prompt_tokens": [prompt], "gen_tokens": [gen]}]})
    jobs = expand(spec, ModelCatalog(mdir))
    data = {j.engine: {"sb": {"prefill_tps": [], "decode_tps": []}, "bare": {"prefill_tps": [], "decode_tps": []}} for j in jobs}
    for rnd in range(rounds):
        for job in jobs:
            res = run_job(job, mdir)
            assert res.status == "ok", res.error
            for m in ("prefill_tps", "decode_tps"):
                data[job.engine]["sb"][m] += res.measured(m)
            out = subprocess.run([sys.executable, str(ROOT / "benchmarks/_bare_loop.py"), job.engine,
                                  str(mdir / job.artifact), str(prompt), str(gen), str(reps), str(job.seed)],
                                 capture_output=True, text=True, env=child_env(job, mdir), check=True)
            bare = json.loads(out.stdout.strip().splitlines()[-1])
            for m in ("prefill_tps", "decode_tps"):
                data[job.engine]["bare"][m] += bare[m]
            console.print(f"round {rnd + 1}/{rounds} {job.engine}: done", style="dim")
    t = Table(title=f"fidelity: {model}, prompt {prompt}, gen {gen}, {rounds} rounds × {reps} reps, interleaved")
    for c in ("engine", "metric", "siliconbench median", "bare median", "ratio", "CV siliconbench", "CV bare"):
        t.add_column(c, justify="right")
    for engine, d in data.items():
        for m in ("prefill_tps", "decode_tps"):
            a, b = d["sb"][m], d["bare"][m]
            t.add_row(engine, m, f"{statistics.median(a):,.1f}", f"{statistics.median(b):,.1f}",
                      f"{statistics.median(a) / statistics.median(b):.3f}", f"{cv(a):.1%}", f"{cv(b):.1%}")
    console.print(t)


if __name__ == "__main__":
    typer.run(main)
