"""Can `compare` be trusted? Its A/A false-positive rate and its power to catch a real 5% slowdown.

    python benchmarks/regression_power.py [--trials 40] [--repetitions 5] [--threads 1] [--slowdown 0.05]

Measured on this machine with the tiny model (tiny-llama-5m, made here if the models folder lacks it),
llama.cpp, the default generate workload (512-token prompt, 128 generated) at the sweep's default
repetitions (5 measured + 1 warmup per job). Each trial runs three real jobs, each in its own fresh
child process, in a rotating order: A, A' (the same job again) and B, the same job slowed down by a real
proportional delay inside the engine's timed calls (benchmarks/_throttle/sitecustomize.py: every timed
call takes 1/(1 - slowdown) as long, so tokens/s fall by exactly `slowdown` on top of the machine's own
noise). Every verdict comes from `coordinator.compare.compare_samples`, the function behind each row of
`siliconbench compare`, at its defaults (alpha 0.05, minimum effect 3%).

Reported, per metric (prefill tok/s, decode tok/s, TTFT):
- one job against one job (what `compare` does with two single-job sides): A vs A' called a regression
  (target < 1%), and A vs B and A' vs B called a regression (target >= 95%);
- the same over every pair of trials, adjacent or hours apart (more comparisons, not independent);
- `siliconbench confirm`'s protocol: its default 4 interleaved rounds pooled per side (20 samples each).
The machine is shared and has 2 cores: 2 threads oversubscribe it (the parent, the child's main thread
and the engine's threads fight for them), hence --threads 1 by default; the spread is printed too.
"""

from __future__ import annotations

import itertools
import json
import math
import os
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

from coordinator.compare import DEFAULT_METRICS, Verdict, compare_samples  # noqa: E402
from coordinator.confirm import DEFAULT_ROUNDS  # noqa: E402
from siliconbench.jobs import expand  # noqa: E402
from siliconbench.manifest import ModelCatalog  # noqa: E402
from siliconbench.settings import load_settings  # noqa: E402
from siliconbench.spec import parse_sweep  # noqa: E402
from worker.child import run_job  # noqa: E402

MODEL = "tiny-llama-5m"
THROTTLE_DIR = ROOT / "benchmarks" / "_throttle"


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
    from worker.models.tiny import make_tiny

    mdir = Path(tempfile.mkdtemp(prefix="sb-power-models-"))
    make_tiny(mdir, name=MODEL, hidden_size=256, n_layers=4, n_heads=4, n_kv_heads=2, seed=0)
    return mdir


def run(job, mdir: Path, throttle: float) -> dict[str, list[float]]:
    saved = {k: os.environ.get(k) for k in ("SILICONBENCH_THROTTLE", "PYTHONPATH")}
    try:
        if throttle:
            os.environ["SILICONBENCH_THROTTLE"] = repr(throttle)
            os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(THROTTLE_DIR), saved["PYTHONPATH"]) if p)
        res = run_job(job, mdir)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if res.status != "ok":
        raise SystemExit(f"job failed: {res.error}\n{res.stderr_tail}")
    return {m: res.measured(m) for m in DEFAULT_METRICS}


def rate(pairs, metric: str, want: Verdict, ci: bool = False) -> tuple[int, int]:
    hits = sum(compare_samples(a[metric], b[metric], metric, ci=ci).verdict == want for a, b in pairs)
    return hits, len(pairs)


def main(trials: int = typer.Option(40, help="Trials of (A, A', B); about 5 s each"),
         repetitions: int = typer.Option(5, help="Measured repetitions per job (the sweep default)"),
         threads: int = typer.Option(1, help="Engine threads (0: all cores)"),
         slowdown: float = typer.Option(0.05, help="Injected drop of tokens/s in B"),
         prompt: int = 512, gen: int = 128,
         models_dir: Path = typer.Option(None), json_out: Path = typer.Option(None, "--json")) -> None:
    console = Console(width=200)
    mdir = models_folder(models_dir)
    spec = parse_sweep({"name": "regression-power", "models": [MODEL], "engines": ["llama.cpp"],
                        "repetitions": repetitions, "warmup": 1, "engine_options": {"threads": threads or None},
                        "workloads": [{"kind": "generate", "prompt_tokens": [prompt], "gen_tokens": [gen]}]})
    job = expand(spec, ModelCatalog(mdir))[0]
    factor = 1.0 / (1.0 - slowdown) - 1.0  # each timed call takes (1 + factor) x as long
    t0 = time.perf_counter()
    busy0, own0 = machine_busy(), own_cpu()
    run(job, mdir, 0.0)  # the first job after start-up is slow (page cache, CPU frequency): not counted
    A, A2, B = [], [], []
    orders = [("A", "A2", "B"), ("B", "A", "A2"), ("A2", "B", "A")]  # rotate: no position is always first
    for t in range(trials):
        for name in orders[t % 3]:
            out = run(job, mdir, factor if name == "B" else 0.0)
            {"A": A, "A2": A2, "B": B}[name].append(out)
        if (t + 1) % 5 == 0:
            console.print(f"trial {t + 1}/{trials} ({time.perf_counter() - t0:.0f} s)", style="dim")
    wall = time.perf_counter() - t0
    others = None
    if busy0 is not None:
        busy1, own1 = machine_busy(), own_cpu()
        others = max(0.0, (busy1[0] - busy0[0]) / CLK - (own1 - own0)) / ((busy1[1] - busy0[1]) / CLK)

    figures: dict = {"trials": trials, "repetitions": repetitions, "threads": threads, "slowdown": slowdown,
                     "prompt": prompt, "gen": gen, "wall_s": wall, "others_cpu_share": others, "metrics": {}}
    table = Table(title=f"compare on {MODEL}, llama.cpp, p{prompt} g{gen}, {repetitions} reps/job, threads "
                        f"{threads or 'all'}, B = {slowdown:.0%} slower; {trials} trials in {wall:.0f} s",
                  title_justify="left")
    for c in ("metric", "protocol", "A/A called regression", "95% CI", "A/A any verdict", "A/B regression caught",
              "95% CI", "B/A median ratio", "CV within job"):
        table.add_column(c, justify="right" if c != "protocol" else "left")
    for metric in DEFAULT_METRICS:
        adj_aa = list(zip(A, A2))
        adj_ab = list(zip(A, B)) + list(zip(A2, B))
        all_aa = [(a, b) for a, b in itertools.product(A, A2)]
        all_ab = [(a, b) for a, b in itertools.product(A + A2, B)]
        rounds = DEFAULT_ROUNDS
        pool = lambda xs, i: {metric: [v for x in xs[i:i + rounds] for v in x[metric]]}  # noqa: E731
        conf_aa = [(pool(A, i), pool(A2, i)) for i in range(0, trials - rounds + 1, rounds)]
        conf_ab = [(pool(A, i), pool(B, i)) for i in range(0, trials - rounds + 1, rounds)]
        ratio = statistics.median(statistics.median(b[metric]) for b in B) / \
            statistics.median(statistics.median(a[metric]) for a in A + A2)
        cv = statistics.median(statistics.stdev(x[metric]) / statistics.fmean(x[metric]) for x in A + A2 + B)
        figures["metrics"][metric] = {"b_over_a_median_ratio": ratio, "cv_within_job": cv, "protocols": {}}
        for proto, aa, ab in (("1 job vs 1 job, adjacent", adj_aa, adj_ab), ("1 job vs 1 job, all pairs", all_aa, all_ab),
                              (f"confirm: {rounds} rounds pooled", conf_aa, conf_ab)):
            fp, n_aa = rate(aa, metric, Verdict.regression)
            anyv = sum(compare_samples(a[metric], b[metric], metric, ci=False).verdict
                       in (Verdict.regression, Verdict.improvement) for a, b in aa)
            det, n_ab = rate(ab, metric, Verdict.regression)
            # B is slower: for TTFT (lower is better) a slowdown is a regression just the same.
            lo_fp, hi_fp = wilson(fp, n_aa)
            lo_d, hi_d = wilson(det, n_ab)
            figures["metrics"][metric]["protocols"][proto] = {
                "aa_regression": [fp, n_aa], "aa_any": [anyv, n_aa], "ab_regression": [det, n_ab]}
            table.add_row(metric, proto, f"{fp}/{n_aa} = {fp / max(n_aa, 1):.1%}", f"{lo_fp:.1%}–{hi_fp:.1%}",
                          f"{anyv / max(n_aa, 1):.1%}", f"{det}/{n_ab} = {det / max(n_ab, 1):.1%}",
                          f"{lo_d:.1%}–{hi_d:.1%}", f"{ratio:.3f}", f"{cv:.1%}")
    console.print(table)
    if others is not None:
        console.print(f"Other processes used {others:.0%} of this machine's CPU time during the run "
                      f"({os.cpu_count()} cores).")
    console.print("Targets: A/A called a regression < 1%; a real 5% slowdown caught >= 95%. 'All pairs' "
                  "reuses each job in many comparisons: more resolution, not independent evidence.")
    if json_out:
        json_out.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    typer.run(main)
