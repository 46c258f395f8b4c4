"""How llama.cpp's CPU threads wait, and what it costs on a machine whose cores are busy: the bootstrap's llama-bench
on one model, quiet and beside CPU burners, three ways — the host's default threads with OpenMP's default wait
(they spin), the same threads with ``OMP_WAIT_POLICY=PASSIVE`` (they sleep), and one thread (no barrier at all).

    python benchmarks/omp_wait.py [--rounds 5] [--model tiny-llama-30m] [--models-dir DIR] [--burners N]

Why it matters: ggml's threads meet at a barrier after every operation, OpenMP's in a build that links it (the Linux
builds). A spinning thread whose partner was descheduled burns its own time slice waiting, so beside other work
llama.cpp takes many times the CPU and the wall time it takes alone. `make test`'s parallel part (three test
processes on two cores) sets the policy for this reason (Makefile; docs/measurement.md).

Each round runs every mode in both conditions, in rotated order; each figure is one llama-bench process (pp P and tg
G, ``-r`` reps, its own warm-up): its CPU seconds (user + system, os.wait4), its wall seconds and tg's median
tokens/s; the table gives the median over rounds with a 95 % t-interval. ``--burners`` busy processes (default: one a
core) run during the loaded condition only and are killed by PID after it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from siliconbench.contract.settings import load_settings  # noqa: E402

from benchmarks._interval import interval  # noqa: E402
from harness.tools import llama_tools_bin  # noqa: E402
from siliconbench.worker.platform.threads import OPENMP_WAIT, performance_cores  # noqa: E402

MODES = ("spin (default)", "sleep (OMP_WAIT_POLICY=PASSIVE)", "one thread")
CONDITIONS = ("quiet", "beside burners")
BURN = "while True: pass"


def _gguf(models: Path, model: str, quant: str) -> Path:
    found = sorted((models / model / "gguf").glob(f"*-{quant}.gguf"))
    if not found:
        raise typer.BadParameter(
            f"no {quant} GGUF of {model} in {models} (`siliconbench models make-tiny`)", param_hint="--model"
        )
    return found[0]


def run_once(
    bench: Path, gguf: Path, mode: str, threads: int, prompt: int, gen: int, reps: int
) -> tuple[float, float, float]:
    """(CPU s, wall s, tg tokens/s median) of one llama-bench process in ``mode``."""
    env = {k: v for k, v in os.environ.items() if k not in OPENMP_WAIT}
    if mode == MODES[1]:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    t = 1 if mode == MODES[2] else threads
    cmd = [str(bench), "-m", str(gguf), "-p", str(prompt), "-n", str(gen), "-r", str(reps), "-t", str(t), "-o", "json"]
    start = os.times().elapsed
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = os.times().elapsed - start
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"llama-bench failed: {' '.join(cmd)}")
    tg = next(r for r in json.loads(out) if r["n_gen"] > 0)
    return usage.ru_utime + usage.ru_stime, wall, statistics.median(tg["samples_ts"])


def main(
    rounds: int = typer.Option(
        5, min=1, help="Rounds; each runs every mode in both conditions (one gives no interval)"
    ),
    model: str = typer.Option("tiny-llama-30m", help="A model in the models folder (`models make-tiny` makes it)"),
    quant: str = typer.Option("Q8_0", help="Its GGUF quantization"),
    models_dir: Path = typer.Option(None, help="Models folder (default: SILICONBENCH_MODELS_DIR or the data dir's)"),
    burners: int = typer.Option(0, min=0, help="Busy processes in the loaded condition (0: one a core)"),
    prompt: int = typer.Option(16, min=1),
    gen: int = typer.Option(32, min=1),
    reps: int = typer.Option(3, min=1),
) -> None:
    models = models_dir or load_settings().resolved_models_dir
    gguf = _gguf(models, model, quant)
    bench = llama_tools_bin() / "llama-bench"
    threads, burners = performance_cores(), burners or (os.cpu_count() or 1)
    console = Console()
    figures: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for r in range(rounds):
        for condition in CONDITIONS if r % 2 == 0 else CONDITIONS[::-1]:
            burning = [
                subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(burners if condition != "quiet" else 0)
            ]
            try:
                shift = r % len(MODES)
                for mode in MODES[shift:] + MODES[:shift]:
                    figures.setdefault((condition, mode), []).append(
                        run_once(bench, gguf, mode, threads, prompt, gen, reps)
                    )
            finally:
                for p in burning:
                    p.kill()
                    p.wait()
        console.print(f"round {r + 1}/{rounds}", style="dim")

    def cell(xs: list[float], fmt: str) -> str:
        med, lo, hi = interval(xs)
        return f"{med:{fmt}}" + (f" [{lo:{fmt}}, {hi:{fmt}}]" if rounds > 1 else " (one run)")

    table = Table(title=f"llama-bench {gguf.name} pp{prompt} tg{gen} -r {reps}, {threads} threads by default, "
                  f"{burners} burner(s) when loaded; median [95% interval] of {rounds} round(s)")  # fmt: skip
    for col in ("condition", "threads wait", "CPU s", "wall s", "tg tokens/s"):
        table.add_column(col, justify="left" if col in ("condition", "threads wait") else "right")
    for condition in CONDITIONS:
        for mode in MODES:
            rows = figures[(condition, mode)]
            table.add_row(
                condition, mode, *(cell([x[i] for x in rows], f) for i, f in ((0, ".2f"), (1, ".2f"), (2, ",.0f")))
            )
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
