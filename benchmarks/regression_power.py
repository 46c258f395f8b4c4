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
import math
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from siliconbench.contract.jobs import expand  # noqa: E402
from siliconbench.contract.manifest import ModelCatalog  # noqa: E402
from siliconbench.contract.metrics import HEADLINE, get as get_metric  # noqa: E402
from siliconbench.contract.settings import load_settings  # noqa: E402
from siliconbench.contract.spec import COMPARE_PROCESSES, parse_sweep  # noqa: E402

from siliconbench.coordinator.stats.sequential import LOOKS, SPENDING_RHO, decide, look_alphas  # noqa: E402
from siliconbench.coordinator.stats.significance import (  # noqa: E402
    DEFAULT_ALPHA,
    DEFAULT_MIN_EFFECT,
    EQUIVALENCE_LEVEL,
    Verdict,
    compare_processes,
)
from siliconbench.worker.job.child import run_in_child  # noqa: E402

MODEL = "tiny-llama-5m"
THROTTLE_DIR = ROOT / "harness" / "throttle"
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


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a rate k/n."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


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


def pooled_verdict(a: list[float], b: list[float], metric: str) -> Verdict:
    """The first `compare`: every repetition an independent sample (Mann-Whitney U on the pooled values)."""
    from scipy.stats import mannwhitneyu

    m = get_metric(metric)
    ratio = statistics.median(b) / statistics.median(a)
    p = mannwhitneyu(b, a, alternative="two-sided").pvalue
    if p >= DEFAULT_ALPHA or abs(ratio - 1) < DEFAULT_MIN_EFFECT:
        return Verdict.inconclusive  # the first compare's "no change": neither verdict, in today's words
    return Verdict.regression if (ratio < 1) == (m.better == "higher") else Verdict.improvement


def verdict(a: list[dict], b: list[dict], metric: str) -> Verdict:
    return compare_processes([x[metric] for x in a], [x[metric] for x in b], metric).verdict


def spread(procs: list[dict], metric: str) -> tuple[float, float]:
    """Median CV inside a process, and the CV of the per-process medians."""
    inside = statistics.median(statistics.stdev(x[metric]) / statistics.fmean(x[metric]) for x in procs)
    meds = [statistics.median(x[metric]) for x in procs]
    return inside, statistics.stdev(meds) / statistics.fmean(meds)


def rate_cell(hits: int, n: int, ci: bool = True) -> str:
    if not n:
        return "—"
    lo, hi = wilson(hits, n)
    return f"{hits}/{n} = {hits / n:.1%}" + (f" ({lo:.1%}–{hi:.1%})" if ci else "")


def evaluate(data: dict, processes: int, console: Console) -> dict:
    sides = data["sides"]
    A, A2, B = sides["A"], sides["A2"], sides["B"]
    n = min(len(A), len(A2), len(B))
    rng = random.Random(0)
    table = Table(
        title=f"compare on {MODEL}, llama.cpp, p{data['prompt']} g{data['gen']}, {data['repetitions']} "
        f"reps/process, threads {data['threads'] or 'all'}, B = {data['slowdown']:.0%} slower; "
        f"{n} rounds of (A, A', B) in {data['wall_s']:.0f} s",
        title_justify="left",
    )
    for c in ("metric", "protocol", "A/A called a regression (95% CI)", "5% slowdown caught (95% CI)"):
        table.add_column(c, justify="left" if c in ("metric", "protocol") else "right")
    figures: dict = {"processes": processes, "metrics": {}}
    for metric in HEADLINE:
        reg = Verdict.regression  # B is slower: for TTFT (lower is better) that is a regression just the same
        before_aa = sum(pooled_verdict(a[metric], b[metric], metric) == reg for a, b in zip(A, A2, strict=True))
        before_ab = sum(pooled_verdict(a[metric], b[metric], metric) == reg for a, b in zip(A + A2, B + B, strict=True))
        blocks = [slice(s, s + processes) for s in range(0, n - processes + 1, processes)]
        blk_aa = sum(verdict(A[s], A2[s], metric) == reg for s in blocks)
        blk_ab = sum(verdict(X[s], B[s], metric) == reg for s in blocks for X in (A, A2))
        draw_aa = draw_ab = 0
        seq = {"aa": [0, 0], "ab": [0, 0]}  # [regressions called, processes a side used] over the draws
        for _ in range(DRAWS):
            s = rng.randrange(n - processes + 1)
            left, right = [], []
            for i in range(s, s + processes):  # each round gives one process to each side, in either order
                pair = [A[i], A2[i]] if rng.random() < 0.5 else [A2[i], A[i]]
                left.append(pair[0])
                right.append(pair[1])
            draw_aa += verdict(left, right, metric) == reg
            draw_ab += verdict(left, B[s : s + processes], metric) == reg
            if processes >= LOOKS[-1]:  # the same draw, judged by the sequential design (its looks in round order)
                for key, other in (("aa", right), ("ab", B[s : s + processes])):
                    d = decide([x[metric] for x in left], [x[metric] for x in other], metric)
                    seq[key][0] += d.verdict == reg
                    seq[key][1] += d.processes
        inside, between = spread(A + A2, metric)
        ratio = statistics.median(statistics.median(b[metric]) for b in B) / statistics.median(
            statistics.median(a[metric]) for a in A + A2
        )
        label = f"{metric}\nCV in / between processes {inside:.1%} / {between:.1%}\nB/A {ratio:.3f}"
        table.add_row(
            label, "before: 1 process a side, repetitions pooled", rate_cell(before_aa, n), rate_cell(before_ab, 2 * n)
        )
        table.add_row(
            "",
            f"now: {processes} processes a side, disjoint blocks",
            rate_cell(blk_aa, len(blocks)),
            rate_cell(blk_ab, 2 * len(blocks)),
        )
        table.add_row(
            "",
            f"now: {processes} processes a side, {DRAWS} random splits",
            rate_cell(draw_aa, DRAWS, False),
            rate_cell(draw_ab, DRAWS, False),
            end_section=processes < LOOKS[-1],
        )
        if processes >= LOOKS[-1]:
            avg = {k: v[1] / DRAWS for k, v in seq.items()}
            table.add_row(
                "",
                f"sequential: looks at {', '.join(map(str, LOOKS))} a side, the same splits; mean "
                f"processes a side {avg['aa']:.1f} (A/A) / {avg['ab']:.1f} (A/B), average "
                f"{(avg['aa'] + avg['ab']) / 2:.2f}",
                rate_cell(seq["aa"][0], DRAWS, False),
                rate_cell(seq["ab"][0], DRAWS, False),
                end_section=True,
            )
        figures["metrics"][metric] = {
            "cv_inside_process": inside,
            "cv_between_processes": between,
            "b_over_a": ratio,
            "before": {"aa": [before_aa, n], "ab": [before_ab, 2 * n]},
            "blocks": {"aa": [blk_aa, len(blocks)], "ab": [blk_ab, 2 * len(blocks)]},
            "draws": {"aa": [draw_aa, DRAWS], "ab": [draw_ab, DRAWS]},
            "sequential": {
                "looks": list(LOOKS),
                "aa": [seq["aa"][0], DRAWS],
                "ab": [seq["ab"][0], DRAWS],
                "mean_processes_aa": seq["aa"][1] / DRAWS,
                "mean_processes_ab": seq["ab"][1] / DRAWS,
                "mean_processes": (seq["aa"][1] + seq["ab"][1]) / (2 * DRAWS),
            },
        }
    console.print(table)
    if processes >= LOOKS[-1]:
        console.print(designs_table(figures, processes))
    if data.get("others_cpu_share") is not None:
        console.print(
            f"Other processes used {data['others_cpu_share']:.0%} of this machine's CPU time during the "
            f"run ({os.cpu_count()} cores)."
        )
    console.print(
        "Targets: A/A called a regression < 1%; a real 5% slowdown caught >= 95%. Random splits reuse "
        "each process in many comparisons: resolution, not independent evidence."
    )
    return figures


def designs_table(figures: dict, processes: int) -> Table:
    """Fixed and sequential side by side on the same splits, with the target for each metric."""
    budget = processes / 2
    nominal = ", ".join(f"{a:.4f}" for a in look_alphas())
    table = Table(
        title=f"fixed {processes} a side vs sequential (looks {'/'.join(map(str, LOOKS))}, Lan-DeMets "
        f"alpha*t^{SPENDING_RHO:g}: nominal p {nominal}; equivalent once the ratio's "
        f"{EQUIVALENCE_LEVEL:.0%} interval is inside the minimum effect), {DRAWS} splits; target: "
        f"A/A < 1%, caught >= 95%, mean processes a side <= {budget:g}",
        title_justify="left",
    )
    for c in (
        "metric",
        f"fixed {processes}: A/A",
        "caught",
        "sequential: A/A",
        "caught",
        "processes a side A/A",
        "A/B",
        "average",
        "target",
    ):
        table.add_column(c, justify="left" if c == "metric" else "right")
    for metric, f in figures["metrics"].items():
        fx, sq = f["draws"], f["sequential"]
        aa, ab = sq["aa"][0] / sq["aa"][1], sq["ab"][0] / sq["ab"][1]
        met = aa < 0.01 and ab >= 0.95 and sq["mean_processes"] <= budget
        table.add_row(
            metric,
            f"{fx['aa'][0] / fx['aa'][1]:.1%}",
            f"{fx['ab'][0] / fx['ab'][1]:.1%}",
            f"{aa:.1%}",
            f"{ab:.1%}",
            f"{sq['mean_processes_aa']:.1f}",
            f"{sq['mean_processes_ab']:.1f}",
            f"{sq['mean_processes']:.2f}",
            "met" if met else "NOT met",
        )
        f["target_met"] = met
    return table


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
