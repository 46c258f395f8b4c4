"""How much of a decoded token's time is ours, outside llama.cpp? The decode loop's wall time per token next to the
engine's own count of the same steps (llama_perf_context: t_eval spans llama_decode to llama_synchronize), on the
fastest configuration this host can make (a small model at short context), so the overhead is as large a share as
it gets.

    python benchmarks/decode_overhead.py [MODEL.gguf | --model smollm2-135m] [--rounds 9] [--gen 256]

Loops compared on one loaded model, interleaved round by round (each round: every loop once, order rotated):

  llama-bench     llama-bench's test_gen: the preallocated one-token batch, llama_decode, llama_synchronize, a
                  pseudo-random next token (no sampling). The floor a Python loop can reach.
  numpy argmax    the loop decode_tps used up to 2026-12-06: the same steps plus np.ctypeslib.as_array over the
                  logits buffer and its argmax on the host, per token.
  siliconbench    LlamaCppEngine.decode as it is now (what decode_tps times).

Per loop: wall µs/token, engine µs/token, their difference (ours, outside the engine) as a median over rounds with a
95 % t-interval, and that difference as a share of a token at 1,000 tok/s (the target: at most 1 %, i.e. 10 µs).
"""

from __future__ import annotations

import ctypes
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from siliconbench.contract.settings import load_settings  # noqa: E402

from benchmarks._interval import interval  # noqa: E402
from siliconbench.worker.engines.llama_cpp import LlamaCppEngine  # noqa: E402

TARGET_US = 10.0  # 1 % of a token at 1,000 tok/s
PROMPT = 16


def llama_bench_loop(engine: LlamaCppEngine, token: int, n: int) -> int:
    lib, one, ctx = engine.lib, engine._one, engine.ctx
    pos = lib.llama_memory_seq_pos_max(lib.llama_get_memory(ctx), 0) + 1
    for i in range(n):
        one.token[0], one.pos[0] = token, pos
        if lib.llama_decode(ctx, one) != 0:
            raise RuntimeError(f"llama_decode failed at position {pos}")
        lib.llama_synchronize(ctx)
        token = (token * 1103515245 + 12345 + i) % engine.n_vocab  # llama-bench: std::rand() % n_vocab
        pos += 1
    return token


def numpy_argmax_loop(engine: LlamaCppEngine, token: int, n: int) -> int:
    lib, one, ctx = engine.lib, engine._one, engine.ctx
    as_array, n_vocab = np.ctypeslib.as_array, engine.n_vocab
    pos = lib.llama_memory_seq_pos_max(lib.llama_get_memory(ctx), 0) + 1
    for _ in range(n):
        one.token[0], one.pos[0] = token, pos
        if lib.llama_decode(ctx, one) != 0:
            raise RuntimeError(f"llama_decode failed at position {pos}")
        lib.llama_synchronize(ctx)
        token = int(as_array(lib.llama_get_logits_ith(ctx, -1), shape=(n_vocab,)).argmax())
        pos += 1
    return token


def one_view_loop(engine: LlamaCppEngine, token: int, n: int) -> int:
    """numpy's argmax over one view of llama.cpp's logits buffer, made again only when the buffer moves."""
    lib, one, ctx = engine.lib, engine._one, engine.ctx
    get_logits, n_vocab = engine._logits_address(), engine.n_vocab
    view, at = None, None
    pos = lib.llama_memory_seq_pos_max(lib.llama_get_memory(ctx), 0) + 1
    for _ in range(n):
        one.token[0], one.pos[0] = token, pos
        if lib.llama_decode(ctx, one) != 0:
            raise RuntimeError(f"llama_decode failed at position {pos}")
        lib.llama_synchronize(ctx)
        addr = get_logits(ctx, -1)
        if addr != at:
            view, at = np.frombuffer((ctypes.c_float * n_vocab).from_address(addr), dtype=np.float32), addr
        token = int(view.argmax())
        pos += 1
    return token


def greedy_sampler_loop(engine: LlamaCppEngine, token: int, n: int) -> int:
    """llama.cpp's own greedy sampler in a chain (llama_sampler_sample: the chain's preallocated candidates, filled
    from the logits, then the greedy pick): what llama-cli and llama-server run on the host."""
    lib, one, ctx = engine.lib, engine._one, engine.ctx
    chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
    lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
    pos = lib.llama_memory_seq_pos_max(lib.llama_get_memory(ctx), 0) + 1
    try:
        for _ in range(n):
            one.token[0], one.pos[0] = token, pos
            if lib.llama_decode(ctx, one) != 0:
                raise RuntimeError(f"llama_decode failed at position {pos}")
            lib.llama_synchronize(ctx)
            token = lib.llama_sampler_sample(chain, ctx, -1)
            pos += 1
    finally:
        lib.llama_sampler_free(chain)
    return token


LOOPS = {
    "llama-bench": llama_bench_loop,
    "numpy argmax": numpy_argmax_loop,
    "greedy sampler": greedy_sampler_loop,
    "numpy, one view": one_view_loop,
}
OURS = "siliconbench"  # LlamaCppEngine.decode at its default sampling, on an engine of its own


def one_run(engine: LlamaCppEngine, loop, n_gen: int, seed: int) -> tuple[float, float]:
    """(wall µs/token, engine µs/token) of n_gen decode steps after a short prompt."""

    rng = np.random.default_rng(seed)
    prompt = [int(t) for t in rng.integers(1000, engine.n_vocab - 1, PROMPT)]
    engine.reset()
    first = engine.first_token(engine.prefill(prompt))
    engine.lib.llama_perf_context_reset(engine.ctx)
    t0 = time.perf_counter()
    loop(engine, first, n_gen)
    wall = time.perf_counter() - t0
    perf = engine.lib.llama_perf_context(engine.ctx)
    if perf.n_eval != n_gen:
        raise RuntimeError(f"the engine counted {perf.n_eval} decode steps, not {n_gen}")
    return wall / n_gen * 1e6, perf.t_eval_ms * 1000.0 / n_gen


def resolve(model: str) -> Path:
    path = Path(model)
    if path.is_file():
        return path
    folder = load_settings().resolved_models_dir / model
    found = sorted(folder.rglob("*.gguf"), key=lambda p: ("F16" not in p.name.upper(), p.name))
    if not found:
        raise typer.BadParameter(
            f"no GGUF file under {folder} (add it: siliconbench models add-smollm2)", param_hint="--model"
        )
    return found[0]


def main(
    gguf: str = typer.Argument("", help="a GGUF file (else --model in the models folder)"),
    model: str = typer.Option(
        "smollm2-135m", help="a model folder under the models directory (siliconbench models add-smollm2)"
    ),
    rounds: int = typer.Option(9, min=2),
    gen: int = typer.Option(256, min=8),
    threads: int = typer.Option(1, help="llama.cpp threads: 1 makes the tiny model's step shortest here"),
) -> None:
    path = resolve(gguf or model)
    # the host loops need the logits copied back: an engine sampling on the host; beside it one sampling on the backend
    host, ours = LlamaCppEngine(), LlamaCppEngine()
    host.load(path, {"threads": threads, "sampling": "host"}, n_ctx=PROMPT + gen + 8)
    ours.load(path, {"threads": threads, "sampling": "backend"}, n_ctx=PROMPT + gen + 8)
    probe = LlamaCppEngine()  # which path a job takes here by default (sampling 'auto')
    probe.load(path, {"threads": threads}, n_ctx=PROMPT + 8)
    default = probe.sampling
    probe.close()
    console = Console(width=200)
    console.print(
        f"{path.name}: n_vocab {host.n_vocab}, {threads} thread(s), backend {ours.describe()['backend']}, "
        f"{gen} tokens after a {PROMPT}-token prompt; a job here samples on the {default} by default (sampling: auto)"
    )
    runs = {name: (host, loop) for name, loop in LOOPS.items()}
    runs[f"{OURS}, host"] = (host, lambda engine, token, n: engine.decode(token, n))
    runs[f"{OURS}, {ours.sampling}"] = (ours, lambda engine, token, n: engine.decode(token, n))
    names = list(runs)
    walls: dict[str, list[float]] = {n: [] for n in names}
    engines: dict[str, list[float]] = {n: [] for n in names}
    for name in names:  # warm-up, discarded
        one_run(*runs[name], gen, seed=0)
    for r in range(rounds):
        for k in range(len(names)):
            name = names[(r + k) % len(names)]
            wall, eng = one_run(*runs[name], gen, seed=r + 1)
            walls[name].append(wall)
            engines[name].append(eng)
        console.print(f"round {r + 1}/{rounds}", style="dim")
    host.close()
    ours.close()

    floor = [w - e for w, e in zip(walls["llama-bench"], engines["llama-bench"], strict=True)]
    table = Table(
        title="decode: µs per token — wall, the engine's own count, and the time outside it beyond llama-bench's own "
        "loop (paired by round): median [95% interval]"
    )
    for col in (
        "loop",
        "wall",
        "engine",
        "outside the engine",
        "beyond llama-bench's loop",
        "at 1,000 tok/s",
        "target",
    ):
        table.add_column(col, justify="right" if col != "loop" else "left")
    for name in names:
        outside = [w - e for w, e in zip(walls[name], engines[name], strict=True)]
        beyond = [o - f for o, f in zip(outside, floor, strict=True)]
        med, lo, hi = interval(beyond)
        judged = name.startswith(OURS)
        table.add_row(
            f"{name} (default here)" if name == f"{OURS}, {default}" else name,
            f"{statistics.median(walls[name]):.1f}",
            f"{statistics.median(engines[name]):.1f}",
            f"{statistics.median(outside):.1f}",
            f"{med:.1f} [{lo:.1f}, {hi:.1f}]" if name != "llama-bench" else "",
            f"{med / 10:.2f} %" if name != "llama-bench" else "",
            ("PASS" if hi <= TARGET_US else "FAIL") if judged else "",
        )
    console.print(table)
    # what the backend sampler costs inside the engine: its step ÷ the host path's step, paired by round
    cost = [b / h for b, h in zip(engines[f"{OURS}, backend"], engines[f"{OURS}, host"], strict=True)]
    med, lo, hi = interval(cost)
    console.print(f"the engine's own step, sampling on the backend ÷ on the host: {med:.4f} [{lo:.4f}, {hi:.4f}]")


if __name__ == "__main__":
    typer.run(main)
