"""Why does n_prompt / ttft read above mlx_lm.benchmark's prompt_tps? The regions side by side, in one process on
one loaded model, interleaved round by round (each round: every region once, order rotated), a fresh cache each.

    python benchmarks/mlx_prompt_time.py [MODEL_DIR | --model smollm2-135m] [--rounds 9] [--prompt 512]

  siliconbench ttft      MlxEngine.prefill + first_token: the ttft_ms region (ends when the first token id is on
                         the host).
  + next step queued     the same, but the first decode step is built and queued (mx.async_eval) before the first
                         token is read, as mlx_lm's generate_step orders it.
  mlx_lm generate_step   mlx_lm's own generator: from the call until it yields the first token (stream_generate's
                         prompt_time, which mlx_lm.benchmark's prompt_tps divides the prompt by).
  one decode step        the step that generate_step queues before it hands out the first token, alone.

Printed: each region's median ms with a 95 % interval, and n_prompt / region as a ratio to mlx_lm's. If
"+ next step queued" matches generate_step, the difference is that queued step: its dispatch (building the graph,
launching it) and, on an in-order stream, its compute.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from siliconbench.contract.settings import load_settings  # noqa: E402

from benchmarks._interval import interval  # noqa: E402
from siliconbench.worker.engines.mlx_lm import MlxEngine  # noqa: E402
from siliconbench.worker.envs.blas import child_blas_env  # noqa: E402
from siliconbench.worker.workloads.timing import synthetic_tokens  # noqa: E402


def ours(engine: MlxEngine, prompt: list[int]) -> float:
    engine.reset()
    t0 = time.perf_counter()
    engine.first_token(engine.prefill(prompt))
    return time.perf_counter() - t0


def ours_next_queued(engine: MlxEngine, prompt: list[int]) -> float:
    mx = engine.mx
    engine.reset()
    t0 = time.perf_counter()
    logits = engine.prefill(prompt)
    with mx.stream(engine.stream):
        y = mx.argmax(logits, axis=-1)
        mx.async_eval(y)
        nxt = engine._step(y)
        mx.async_eval(nxt)
        y.item()
    elapsed = time.perf_counter() - t0
    mx.eval(nxt)
    return elapsed


def mlx_lm_generate_step(engine: MlxEngine, prompt: list[int]) -> float:
    from mlx_lm.generate import generate_step  # the engine: optional, imported by the run that uses it

    mx = engine.mx
    engine.reset()
    t0 = time.perf_counter()
    gen = generate_step(
        mx.array(prompt), engine.model, max_tokens=2, prompt_cache=engine.cache, prefill_step_size=engine.prefill_step
    )
    next(gen)
    elapsed = time.perf_counter() - t0
    for _ in gen:
        pass
    return elapsed


def one_step(engine: MlxEngine, prompt: list[int]) -> float:
    engine.reset()
    first = engine.first_token(engine.prefill(prompt))
    t0 = time.perf_counter()
    engine.decode(first, 1)
    return time.perf_counter() - t0


REGIONS = {
    "siliconbench ttft": ours,
    "+ next step queued": ours_next_queued,
    "mlx_lm generate_step": mlx_lm_generate_step,
    "one decode step": one_step,
}


def resolve(model: str) -> Path:
    path = Path(model)
    if (path / "config.json").exists():
        return path
    folder = load_settings().resolved_models_dir / model
    found = sorted(p.parent for p in folder.rglob("config.json") if list(p.parent.glob("*.safetensors")))
    if not found:
        raise typer.BadParameter(f"no MLX model folder under {folder}", param_hint="--model")
    return found[0]


def main(
    model_dir: str = typer.Argument("", help="an MLX model folder (else --model in the models folder)"),
    model: str = typer.Option(
        "smollm2-135m", help="a model folder under the models directory (siliconbench models add-smollm2)"
    ),
    rounds: int = typer.Option(9, min=2),
    prompt: int = typer.Option(512, min=2),
) -> None:
    if "SILICONBENCH_MLX_BLAS" not in os.environ:  # the BLAS a job's child gets (OpenBLAS on a Linux CPU), set
        # before MLX loads, so the regions are the ones a job times: this process again, with it
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **child_blas_env("auto", None)})
    path = resolve(model_dir or model)
    engine = MlxEngine()
    engine.load(path, {}, n_ctx=prompt + 8)
    console = Console(width=160)
    vocab, avoid = engine.vocab_size(), engine.special_token_ids()
    console.print(f"{path}: {engine.describe().get('backend')}, prompt {prompt} tokens")
    names = list(REGIONS)
    times: dict[str, list[float]] = {n: [] for n in names}
    for name in names:  # warm-up (compilation, allocator), discarded
        REGIONS[name](engine, synthetic_tokens(vocab, avoid, prompt, 0))
    for r in range(rounds):
        ids = synthetic_tokens(vocab, avoid, prompt, r + 1)
        for k in range(len(names)):
            name = names[(r + k) % len(names)]
            times[name].append(REGIONS[name](engine, ids))
    engine.close()
    ref = statistics.median(times["mlx_lm generate_step"])
    table = Table(title=f"prompt time regions, ms: median [95% interval] of {rounds} rounds")
    for col in ("region", "ms", "n_prompt / region, tok/s", "vs mlx_lm generate_step"):
        table.add_column(col, justify="left" if col == "region" else "right")
    for name in names:
        med, lo, hi = interval(times[name])
        rate = f"{prompt / med:,.0f}" if name != "one decode step" else ""
        ratio = f"{ref / med:.3f}" if name != "one decode step" else ""
        table.add_row(name, f"{med * 1e3:.2f} [{lo * 1e3:.2f}, {hi * 1e3:.2f}]", rate, ratio)
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
