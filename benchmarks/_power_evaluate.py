"""The evaluation of benchmarks/regression_power.py: every design's verdicts on the collected processes (pooled
repetitions, fixed processes a side in blocks and in random splits, the sequential looks), and the tables."""

from __future__ import annotations

import math
import os
import random
import statistics

from rich.console import Console
from rich.table import Table

from siliconbench.contract.metrics import HEADLINE, get as get_metric

from benchmarks._power_runs import MODEL
from siliconbench.coordinator.stats.sequential import LOOKS, SPENDING_RHO, decide, look_alphas
from siliconbench.coordinator.stats.significance import (
    DEFAULT_ALPHA,
    DEFAULT_MIN_EFFECT,
    EQUIVALENCE_LEVEL,
    Verdict,
    compare_processes,
)

DRAWS = 2000


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a rate k/n."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


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
