"""Can `compare` be trusted? Its A/A false-regression rate and its power to catch a real 5% slowdown.

    python benchmarks/regression_power.py [--rounds 120] [--processes 10] [--repetitions 5] [--threads 1]
                                          [--slowdown 0.05] [--save runs.json | --load runs.json]

Measured on this machine with the tiny model (tiny-llama-5m, made here if the models folder lacks it),
llama.cpp, the default generate workload (512-token prompt, 128 generated) at the sweep's default
repetitions (5 measured + 1 warmup per process). Each round runs three real jobs, each in its own fresh
child process, in a rotating order: A, A' (the same job again) and B, the same job slowed down by a real
proportional delay inside the engine's timed calls (harness/throttle/sitecustomize.py: every timed
call takes 1/(1 - slowdown) as long, so tokens/s fall by exactly `slowdown` on top of the machine's own
noise). Every verdict comes from `siliconbench.coordinator.stats.significance.compare_processes`, the function behind each
row of `siliconbench compare`, at its defaults (alpha 0.05, minimum effect 3%).

Reported per metric (prefill tok/s, decode tok/s, TTFT), A/A called a regression (target < 1%) and the
5% slowdown caught as a regression (target >= 95%), for:
- before: one process a side with its repetitions pooled as if independent (the first `compare`);
- now, P processes a side (P = --processes, the default of a version-comparing sweep and of `confirm`):
  (a) disjoint blocks of P consecutive rounds: independent comparisons, drift included, but few;
  (b) 2,000 random splits inside windows of P consecutive rounds, as the interleaved protocol assigns
      them: in each round of the window a coin says which of A and A' is the baseline's process and which
      the other side's (A/A), and the baseline's process meets that round's B (A/B). Many comparisons
      that keep the protocol's pairing in time; they share processes, so they are resolution, not
      independent evidence.
- sequential (siliconbench/coordinator/stats/sequential.py), on the same splits: looks at `LOOKS` processes a side in the
  window's round order, stopping at the first decisive one; with the mean processes a side it needed for
  A/A and for A/B and their average, against the target: at most half the fixed design's (7.5 of 15) with
  the same A/A < 1% and >= 95% caught. A last table puts the fixed and the sequential design side by side.
Spread inside a process and between processes is printed too: it is why processes are the unit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from siliconbench.contract.spec import COMPARE_PROCESSES  # noqa: E402

from benchmarks._power_evaluate import evaluate  # noqa: E402
from benchmarks._power_runs import collect  # noqa: E402


def main(
    rounds: int = typer.Option(120, help="Rounds of (A, A', B), each job a fresh process; ~5 s a round"),
    processes: int = typer.Option(COMPARE_PROCESSES, help="Processes a side in the comparisons evaluated"),
    repetitions: int = typer.Option(5, help="Measured repetitions per process (the sweep default)"),
    threads: int = typer.Option(1, help="Engine threads (0: all cores)"),
    slowdown: float = typer.Option(0.05, help="Injected drop of tokens/s in B"),
    prompt: int = 512,
    gen: int = 128,
    models_dir: Path = typer.Option(None),
    save: Path = typer.Option(None, help="Write the raw per-process samples here"),
    load: Path = typer.Option(None, help="Evaluate saved samples instead of running jobs"),
    json_out: Path = typer.Option(None, "--json", help="Write the figures here"),
) -> None:
    console = Console(width=160)
    data = (
        json.loads(load.read_text())
        if load
        else collect(rounds, repetitions, threads, slowdown, prompt, gen, models_dir, console)
    )
    if save:
        save.write_text(json.dumps(data))
    figures = evaluate(data, processes, console)
    if json_out:
        json_out.write_text(json.dumps({k: v for k, v in data.items() if k != "sides"} | figures, indent=2))


if __name__ == "__main__":
    typer.run(main)
