"""Do our numbers line up with the engines' own tools? siliconbench next to llama-bench, mlx_lm.benchmark,
llama-perplexity and mlx_lm.perplexity, on the same model files with the same settings, interleaved.

    python benchmarks/fidelity.py [--models tiny-llama-30m,smollm2-135m] [--rounds 5] [--reps 5]
                                  [--prompt 512] [--gen 128] [--depth 0] [--perplexity/--no-perplexity]

Each round runs, per model and engine, one siliconbench job (a fresh child process, siliconbench.worker.job.child.run_in_child) and
the tool (a fresh process), in alternating order (ABBA) so drift hits both alike. The pairs compared, each the
registry's stated equivalence (siliconbench.contract.metrics):

  llama.cpp  prefill_tps                 vs llama-bench pp<P> @ d<D>
  llama.cpp  decode_tps                  vs llama-bench tg<G> @ d<D+P>
  mlx        n_prompt / ttft (prompt tps) vs mlx_lm.benchmark prompt_tps (its prompt time ends at the first token)
  mlx        decode_tps                  vs mlx_lm.benchmark generation_tps x (G-1)/G (G tokens over G-1 steps)

Per round: the ratio of the two processes' medians. Printed: the geometric mean of the per-round ratios with a
95% t-interval on their logs, the medians, and the CV over repetitions inside a process (mean over processes).
Target: every ratio within +-2%, perplexity within 0.5%, siliconbench's CV no worse than the tool's.
"""

from __future__ import annotations

import json
import math
import signal
import statistics
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from siliconbench.contract.jobs import JobSpec, expand  # noqa: E402
from siliconbench.contract.manifest import ModelCatalog  # noqa: E402
from siliconbench.contract.settings import load_settings  # noqa: E402
from siliconbench.contract.spec import parse_sweep  # noqa: E402

from harness import perplexity_tools, tools as _tools  # noqa: E402
from siliconbench.worker.job.child import child_env, run_in_child  # noqa: E402

TARGET = 0.02


def cv(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.fmean(xs) if len(xs) > 1 else 0.0


def ratio_ci(pairs: list[tuple[list[float], list[float]]]) -> tuple[float, float, float]:
    """Geometric mean of per-round median ratios (ours / tool) and its 95% t-interval."""
    logs = [math.log(statistics.median(a) / statistics.median(b)) for a, b in pairs]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), float("nan"), float("nan")
    half = stats.t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


class Series:
    """One compared pair across rounds: per round, our repetitions and the tool's."""

    def __init__(self, model: str, engine: str, ours: str, tool: str):
        self.model, self.engine, self.ours, self.tool = model, engine, ours, tool
        self.rounds: list[tuple[list[float], list[float]]] = []

    def row(self) -> list[str]:
        ours = [statistics.median(a) for a, _ in self.rounds]
        tool = [statistics.median(b) for _, b in self.rounds]
        r, lo, hi = ratio_ci(self.rounds)
        cv_a = statistics.fmean(cv(a) for a, _ in self.rounds)
        cv_b = statistics.fmean(cv(b) for _, b in self.rounds)
        # the interval decides: "yes" only where all of it is within the target; "point" where the ratio is but
        # the interval still reaches past it (more rounds would say); "NO" where the ratio itself is outside
        ok = "yes" if within(lo) and within(hi) else "point" if within(r) else "NO"
        return [
            self.model,
            self.engine,
            self.ours,
            self.tool,
            f"{statistics.median(ours):,.1f}",
            f"{statistics.median(tool):,.1f}",
            f"{r:.3f} [{lo:.3f}, {hi:.3f}]",
            f"{cv_a:.1%}",
            f"{cv_b:.1%}",
            ok,
        ]


def within(x: float) -> bool:
    return not math.isnan(x) and abs(x - 1) <= TARGET


ENERGY = ("prefill_j_per_token", "decode_j_per_token", "prefill_gpu_watts", "decode_gpu_watts")


def _ours(job: JobSpec, mdir: Path) -> dict[str, list[float]]:
    res = run_in_child(job, mdir)
    if res.status != "ok":
        raise RuntimeError(f"{job.label()}: {res.error}\n{res.stderr_tail or ''}")
    out = {m: res.measured(m) for m in ("prefill_tps", "decode_tps", "engine_prefill_tps", "engine_decode_tps")}
    out["prompt_tps"] = [job.n_prompt / (t / 1000.0) for t in res.measured("ttft_ms")]
    out.update({f"_{m}": res.measured(m) for m in ENERGY})  # a GPU's energy windows, where the host has one
    out["_options"] = res.environment.engine_options if res.environment else {}
    return out


def _tool(job: JobSpec, mdir: Path, bin_dir: Path, reps: int, threads: int | None) -> dict[str, list[float]]:
    path = mdir / job.artifact
    if job.engine == "llama.cpp":
        fa = job.engine_options.get("flash_attn", "auto")
        pp = _tools.llama_bench(
            bin_dir, path, n_prompt=job.n_prompt, n_gen=0, depth=job.n_depth, reps=reps, threads=threads, flash_attn=fa
        )
        tg = _tools.llama_bench(
            bin_dir,
            path,
            n_prompt=0,
            n_gen=job.n_gen,
            depth=job.n_depth + job.n_prompt,
            reps=reps,
            threads=threads,
            flash_attn=fa,
        )
        return {"pp": pp, "tg": tg}
    return _tools.mlx_benchmark(path, n_prompt=job.n_prompt, n_gen=job.n_gen, reps=reps, env=child_env(job, mdir))


COLUMNS = (
    "model",
    "engine",
    "siliconbench",
    "tool",
    "ours (median)",
    "tool (median)",
    "ratio [95% CI]",
    "CV ours",
    "CV tool",
    "within ±2%",
)


def _energy_table(console: Console, energy: dict[tuple, dict[str, list[float]]]) -> None:
    """Our jobs' GPU energy windows (siliconbench.contract.metrics: prefill_j_per_token ...), medians over rounds."""
    rows = [(k, v) for k, v in energy.items() if v.get("decode_j_per_token")]
    if not rows:
        return
    t = Table(title="GPU energy of our jobs (NVML, windows of >= 1 s), median over rounds", title_justify="left")
    for c in ("model", "engine", "prefill J/token", "decode J/token", "prefill W", "decode W"):
        t.add_column(c, justify="left" if c in ("model", "engine") else "right")
    for (model, engine), v in rows:
        med = {m: statistics.median(v[m]) if v.get(m) else math.nan for m in ENERGY}
        t.add_row(
            model,
            engine,
            f"{med['prefill_j_per_token']:.5f}",
            f"{med['decode_j_per_token']:.4f}",
            f"{med['prefill_gpu_watts']:.0f}",
            f"{med['decode_gpu_watts']:.0f}",
        )
    console.print(t)


PAIRS = {  # engine -> (our metric, its label, tool key, tool label)
    "llama.cpp": [
        ("prefill_tps", "prefill_tps", "pp", "llama-bench pp{P} @ d{D}"),
        ("decode_tps", "decode_tps", "tg", "llama-bench tg{G} @ d{DP}"),
        ("engine_decode_tps", "engine_decode_tps", "tg", "llama-bench tg{G} @ d{DP}"),
    ],
    "mlx": [
        ("prompt_tps", "n_prompt / ttft", "prompt_tps", "mlx_lm.benchmark prompt_tps"),
        ("decode_tps", "decode_tps", "decode_steps_tps", "mlx_lm.benchmark generation_tps x (G-1)/G"),
    ],
}


def main(
    models: str = "tiny-llama-30m,smollm2-135m",
    rounds: int = 5,
    reps: int = 5,
    prompt: int = 512,
    gen: int = 128,
    depth: int = 0,
    quant: str = "full",
    threads: int = typer.Option(None),
    perplexity: bool = True,
    ppl_windows: int = 4,
    ppl_window_tokens: int = 512,
    models_dir: Path = typer.Option(None),
    engines: str = "llama.cpp,mlx",
    json_out: Path = typer.Option(None, help="also write the table's rows and the energy figures here as JSON"),
) -> None:
    # A SIGTERM (a CI timeout, `kill`) becomes an exception, so the tool running now (subprocess.run) is killed
    # with us instead of running on unobserved; our own jobs' children watch for their parent themselves.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    console = Console(width=200)
    mdir = models_dir or load_settings().resolved_models_dir
    bin_dir = _tools.llama_tools_bin()
    series: list[Series] = []
    options: dict[tuple, dict] = {}
    energy: dict[tuple, dict[str, list[float]]] = {}
    for model in models.split(","):
        spec = parse_sweep(
            {
                "name": "fidelity",
                "models": [model],
                "quantizations": [quant],
                "repetitions": reps,
                "engines": engines.split(","),
                "warmup": 1,
                "engine_options": {"threads": threads},
                "workloads": [{"kind": "generate", "prompt_tokens": [prompt], "gen_tokens": [gen], "depth": [depth]}],
            }
        )
        jobs = expand(spec, ModelCatalog(mdir))
        by_engine = {}
        for job in jobs:
            fmt = dict(P=job.n_prompt, G=job.n_gen, D=job.n_depth, DP=job.n_depth + job.n_prompt)
            by_engine[job.engine] = [
                Series(model, f"{job.engine} {job.quant}", lab, tl.format(**fmt)) for _, lab, _, tl in PAIRS[job.engine]
            ]
            series += by_engine[job.engine]
        for rnd in range(rounds):
            for job in jobs:
                # The tool goes first in even rounds (ABBA either way): a run stopped early has started both.
                order = (lambda: _tool(job, mdir, bin_dir, reps, threads), lambda: _ours(job, mdir))
                first, second = order if rnd % 2 == 0 else order[::-1]
                a, b = first(), second()
                tool, ours = (a, b) if rnd % 2 == 0 else (b, a)
                options[(model, job.engine)] = ours.pop("_options")
                for m in ENERGY:
                    energy.setdefault((model, f"{job.engine} {job.quant}"), {}).setdefault(m, []).extend(
                        ours.pop(f"_{m}")
                    )
                for s, (metric, _, key, _) in zip(by_engine[job.engine], PAIRS[job.engine], strict=False):
                    if ours.get(metric):
                        s.rounds.append((ours[metric], tool[key]))
                console.print(f"[dim]{model} round {rnd + 1}/{rounds} {job.engine} {job.quant}: done[/dim]")

    t = Table(
        title=f"siliconbench ÷ the engines' own tools — p{prompt} g{gen} d{depth}, {rounds} interleaved rounds "
        f"× {reps} repetitions (one fresh process a side per round)",
        title_justify="left",
    )
    for c in COLUMNS:
        t.add_column(c, justify="left" if c in ("model", "engine", "siliconbench", "tool", "within ±2%") else "right")
    for s in series:
        if s.rounds:
            t.add_row(*s.row())
    console.print(t)
    for (model, engine), opts in options.items():
        shown = {
            k: opts[k]
            for k in (
                "threads",
                "threads_batch",
                "flash_attn",
                "flash_attn_effective",
                "type_k",
                "type_v",
                "n_batch",
                "n_ubatch",
                "blas",
                "blas_threads",
            )
            if k in opts
        }
        console.print(f"[dim]{model} {engine} effective options: {shown}[/dim]")
    _energy_table(console, energy)
    if json_out:
        rows = [dict(zip(COLUMNS, s.row(), strict=True)) for s in series if s.rounds]
        json_out.write_text(json.dumps({"rows": rows, "energy": {" ".join(k): v for k, v in energy.items()}}, indent=1))

    if perplexity:
        rows = []
        for model in models.split(","):
            rows += perplexity_tools.perplexity_rows(
                mdir, model, bin_dir, window_tokens=ppl_window_tokens, windows=ppl_windows
            )
        perplexity_tools.print_rows(console, rows)


if __name__ == "__main__":
    typer.run(main)
