"""Do a llama.cpp build's two measuring paths agree? The binding on the build's library against the build's own
llama-bench, on a build where both work (its llama.h matches the binding's), interleaved.

    python benchmarks/build_paths.py --source DIR [--ref REF] [--model tiny-llama-30m] [--quant full]
                                     [--rounds 6] [--reps 5] [--prompt 256] [--gen 64]

Default source: the llama.cpp tree llama-cpp-python 0.3.36 vendors, as a git repository (harness/llama_repo.py), at
its first commit. Each round runs one job per path (``llama.cpp.driver: binding`` then ``llama-bench``, the order
alternating), each a fresh child process (siliconbench.worker.job.child.run_in_child, as every job). Per round: the ratio of
the two processes' medians; printed, the geometric mean over rounds with a 95 % t-interval, per metric:

  prefill_tps         binding ÷ llama-bench ppP
  decode_tps          binding (llama_decode + the host argmax choosing each token) ÷ llama-bench tgG @ dP
  engine_decode_tps   llama.cpp's own count of the binding's decode steps ÷ llama-bench tgG @ dP

Target: within ±2 % (the engine's standing against llama-bench); decode_tps may sit below by the argmax's share.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from siliconbench.contract.jobs import expand  # noqa: E402
from siliconbench.contract.manifest import ModelCatalog  # noqa: E402
from siliconbench.contract.settings import load_settings  # noqa: E402
from siliconbench.contract.spec import parse_sweep  # noqa: E402

from benchmarks.fidelity import TARGET, cv, ratio_ci  # noqa: E402
from harness.llama_repo import make_repo  # noqa: E402
from siliconbench.worker.envs.builds import add_build  # noqa: E402
from siliconbench.worker.envs.venvs import interpreters  # noqa: E402
from siliconbench.worker.job.child import run_in_child  # noqa: E402

METRICS = ("prefill_tps", "decode_tps", "engine_decode_tps")
console = Console()


def main(
    source: Path = typer.Option(None, help="A llama.cpp git checkout (default: harness/llama_repo.py's)"),
    ref: str = typer.Option("b1", help="A commit whose llama.h matches this interpreter's binding"),
    model: str = typer.Option("tiny-llama-30m"),
    quant: str = typer.Option("full"),
    rounds: int = typer.Option(6),
    reps: int = typer.Option(5),
    prompt: int = typer.Option(256),
    gen: int = typer.Option(64),
) -> None:
    source = source or make_repo()
    env = add_build(source, ref, tools=("llama-bench",), progress=lambda m: console.print(m, style="dim"))
    if not env.build["compatibility"]["compatible"]:
        raise typer.BadParameter(f"{ref}: {env.build['compatibility']['first_difference']}", param_hint="--ref")
    s = load_settings()
    catalog = ModelCatalog(s.resolved_models_dir)
    jobs = {}
    for driver in ("binding", "llama-bench"):
        spec = parse_sweep(
            {
                "name": f"paths-{driver}",
                "models": [model],
                "engines": ["llama.cpp"],
                "quantizations": [quant],
                "workloads": [{"kind": "generate", "prompt_tokens": [prompt], "gen_tokens": [gen], "depth": [0]}],
                "repetitions": reps,
                "engine_versions": {"llama.cpp": [env.version]},
                "processes": rounds,
                "engine_options": {"llama.cpp": {"driver": driver}},
            }
        )
        jobs[driver] = expand(spec, catalog)
    pythons = interpreters(jobs["binding"])
    samples: dict[str, dict[str, list[list[float]]]] = {d: {m: [] for m in METRICS} for d in jobs}
    for r in range(rounds):
        order = ("binding", "llama-bench") if r % 2 == 0 else ("llama-bench", "binding")
        for driver in order:
            job = jobs[driver][r]
            result = run_in_child(job, s.resolved_models_dir, python=pythons[(job.engine, job.engine_version)])
            if result.status.value != "ok":
                raise SystemExit(f"round {r + 1} {driver}: {result.error}\n{result.stderr_tail or ''}")
            for m in METRICS:
                if values := result.measured(m):
                    samples[driver][m].append(values)
        console.print(f"round {r + 1}/{rounds}: done", style="dim")
    t = Table(
        title=f"{env.version} ({env.build['revision']['sha'][:12]}) {model} {quant}: the binding ÷ the build's "
        f"llama-bench, p{prompt} g{gen}, {rounds} interleaved rounds × {reps} repetitions",
        title_justify="left",
    )
    for c in ("binding", "llama-bench", "binding (median)", "llama-bench (median)", "ratio [95% CI]", "CV", "±2%"):
        t.add_column(c)
    tool = {"prefill_tps": "prefill_tps", "decode_tps": "decode_tps", "engine_decode_tps": "decode_tps"}
    for m in METRICS:
        ours, theirs = samples["binding"][m], samples["llama-bench"][tool[m]]
        if not ours or not theirs:
            continue
        ratio, lo, hi = ratio_ci(list(zip(ours, theirs, strict=True)))
        med = lambda procs: statistics.median(v for p in procs for v in p)  # noqa: E731
        t.add_row(
            m,
            f"llama-bench {'pp' if m == 'prefill_tps' else 'tg'}",
            f"{med(ours):,.1f}",
            f"{med(theirs):,.1f}",
            f"{ratio:.3f} [{lo:.3f}, {hi:.3f}]",
            f"{statistics.fmean(cv(p) for p in ours):.1%} / {statistics.fmean(cv(p) for p in theirs):.1%}",
            "yes" if 1 - TARGET <= lo and hi <= 1 + TARGET else "NO",
        )
    console.print(t)


if __name__ == "__main__":
    typer.run(main)
