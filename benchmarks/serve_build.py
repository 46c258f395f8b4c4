"""Serving a llama.cpp build through its own llama-server: does it give what the same tree served the usual way does?

    python benchmarks/serve_build.py [--source DIR] [--ref b1] [--model tiny-llama-30m] [--rounds 5]
                                     [--requests 16] [--rate 4] [--max-tokens 32]

``--ref`` is built (``env add llama.cpp --source DIR --ref REF --tools llama-bench,llama-server``); default the tree
llama-cpp-python 0.3.36 vendors (harness/llama_repo.py's first commit), which is also what the bootstrap builds the
wheel's own llama-server from. Each round runs the same serve job twice, in alternating order: on the build (its own
llama-server, the tokenizer from the wheel's library: ``measured_by llama-server``) and on the wheel (the bootstrap's
llama-server), each a fresh child process. Printed: TTFT and TPOT medians of each, build ÷ wheel as a geometric mean
of the per-round ratios with a 95 % t-interval (target: within 5 %, the serve client's own standing).
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

from benchmarks.serve_client import TARGET, ratio_ci  # noqa: E402
from harness.llama_repo import make_repo  # noqa: E402
from siliconbench.worker.envs.builds import add_build  # noqa: E402
from siliconbench.worker.envs.venvs import interpreters  # noqa: E402
from siliconbench.worker.job.child import run_in_child  # noqa: E402

METRICS = ("serve_ttft_ms", "serve_tpot_ms")
console = Console(width=170)


def main(
    source: Path = typer.Option(None, help="A llama.cpp git checkout (default: harness/llama_repo.py's)"),
    ref: str = typer.Option("b1"),
    model: str = typer.Option("tiny-llama-30m"),
    quant: str = typer.Option("full"),
    rounds: int = typer.Option(5),
    requests: int = typer.Option(16),
    rate: float = typer.Option(4.0),
    max_tokens: int = typer.Option(32),
    prompt_tokens: int = typer.Option(128),
) -> None:
    source = source or make_repo()
    env = add_build(
        source, ref, tools=("llama-bench", "llama-server"), progress=lambda m: console.print(m, style="dim")
    )
    s = load_settings()
    catalog = ModelCatalog(s.resolved_models_dir)
    base = {
        "models": [model],
        "engines": ["llama.cpp"],
        "quantizations": [quant],
        "workloads": [
            {
                "kind": "serve",
                "request_rate": [rate],
                "num_requests": requests,
                "prompt_tokens": prompt_tokens,
                "max_tokens": max_tokens,
                "slots": 4,
            }
        ],
        "repetitions": 1,
        "warmup": 1,
        "processes": rounds,
        "timeout_s": 3600,
    }
    jobs = {
        "build": expand(
            parse_sweep({**base, "name": "served-build", "engine_versions": {"llama.cpp": [env.version]}}), catalog
        ),
        "wheel": expand(parse_sweep({**base, "name": "served-wheel"}), catalog),
    }
    pythons = interpreters(jobs["build"])
    medians: dict[str, dict[str, list[float]]] = {k: {m: [] for m in METRICS} for k in jobs}
    for r in range(rounds):
        for side in ("build", "wheel") if r % 2 == 0 else ("wheel", "build"):
            job = jobs[side][r]
            result = run_in_child(job, s.resolved_models_dir, python=pythons.get((job.engine, job.engine_version)))
            if result.status.value != "ok":
                raise SystemExit(f"round {r + 1} {side}: {result.error}\n{result.stderr_tail or ''}")
            if side == "build":
                assert result.environment.engine_build.get("measured_by") == "llama-server", result.environment
            for m in METRICS:
                medians[side][m].append(statistics.median(result.measured(m)))
        console.print(f"round {r + 1}/{rounds}: done", style="dim")
    t = Table(
        title=f"serve on the build {env.version} ({env.build['revision']['sha'][:12]}, its own llama-server) ÷ the "
        f"wheel's llama-server, {model} {quant}, {requests} requests at {rate:g}/s, {rounds} interleaved rounds "
        f"(target ±{TARGET:.0%})",
        title_justify="left",
    )
    for c in ("metric", "build (median)", "wheel (median)", "build ÷ wheel [95% CI]", "within 5 %"):
        t.add_column(c, justify="left" if c == "metric" else "right")
    for m in METRICS:
        a, b = medians["build"][m], medians["wheel"][m]
        g, lo, hi = ratio_ci([x / y for x, y in zip(a, b, strict=True)])
        t.add_row(
            m,
            f"{statistics.median(a):,.2f}",
            f"{statistics.median(b):,.2f}",
            f"{g:.3f} [{lo:.3f}, {hi:.3f}]",
            "yes" if abs(statistics.median(a) / statistics.median(b) - 1) <= TARGET else "NO",
        )
    console.print(t)


if __name__ == "__main__":
    typer.run(main)
