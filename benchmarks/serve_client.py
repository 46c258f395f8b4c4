"""Is the serve workload's arithmetic vLLM's? Its measurement path next to an independent load generator, against the
same running server, with the same requests at the same arrival times, interleaved.

    python benchmarks/serve_client.py [--model smollm2-135m] [--quant q4] [--engines llama.cpp,mlx]
                                      [--rounds 5] [--requests 16] [--rate 4|inf] [--concurrency 4] [--max-tokens 32]
                                      [--server-cpus 0]

One server per engine, started with the command line a serve job of the same settings gets, warmed by one discarded
run of each path. The requests are chat requests of one user message of ``--prompt-tokens`` corpus tokens; every run
gets its own prompts of that length, so a server's prompt cache never serves one path a prefix the other computed
(sending both the very same bodies measured llama-server's cache, 18 ms to a first token, and the clients' own
overheads). Each round runs, in
alternating order (ABBA), (A) the workload's own path — the request bodies of siliconbench/worker/workloads/serve.py sent by
siliconbench/worker/serving/load.py (threads, http.client) and judged by its ``figures`` — and (B) the client below: asyncio and
httpx, written from vLLM's ``bench serve`` (vllm/benchmarks/serve.py and lib/endpoint_request_func.py) and sharing
no code with the workload: TTFT from sending to the first chunk with content, ITL between content chunks, latency
to the last chunk, TPOT = (latency - TTFT) / (output tokens - 1), output tokens from the server's usage report.

Printed per engine: the medians of TTFT and TPOT per round, ours / the client's as a geometric mean of the per-round
ratios with a 95 % t-interval, the medians' ratio (target within 5 %), and whether every request of both paths got
exactly max_tokens output tokens by the server's usage report.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import httpx
import typer
from rich.console import Console
from rich.table import Table
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from siliconbench.contract.jobs import expand  # noqa: E402
from siliconbench.contract.manifest import ModelCatalog  # noqa: E402
from siliconbench.contract.settings import load_settings  # noqa: E402
from siliconbench.contract.spec import parse_sweep  # noqa: E402

from siliconbench.worker.engines import get_engine  # noqa: E402
from siliconbench.worker.serving import load  # noqa: E402
from siliconbench.worker.serving.client import stream_request  # noqa: E402
from siliconbench.worker.serving.process import Server, free_port  # noqa: E402
from siliconbench.worker.serving.servers import command  # noqa: E402
from siliconbench.worker.workloads.common import Prompts  # noqa: E402
from siliconbench.worker.workloads.serve import PATHS, body_of  # noqa: E402

TARGET = 0.05


# ---- (B) the independent client: vLLM's request function and arithmetic, asyncio + httpx -------------------------


async def _request(client: httpx.AsyncClient, url: str, body: dict, start: float, at: float) -> dict:
    delay = start + at - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)
    out = {"ok": False, "ttft": 0.0, "itl": [], "latency": 0.0, "output_tokens": None, "prompt_tokens": None}
    st = time.perf_counter()
    most_recent = most_recent_any = st
    async with client.stream("POST", url, json=body) as resp:
        if resp.status_code != 200:
            out["error"] = f"HTTP {resp.status_code}"
            return out
        async for line in resp.aiter_lines():
            line = line.strip()
            if not line.startswith("data:"):
                continue
            data = line[len("data:") :].strip()
            if data == "[DONE]":
                break
            timestamp = time.perf_counter()
            chunk = json.loads(data)
            for choice in chunk.get("choices") or []:
                content = (choice.get("delta") or {}).get("content") if "delta" in choice else choice.get("text")
                if content:
                    if out["ttft"] == 0.0:
                        out["ttft"] = timestamp - st
                    else:
                        out["itl"].append(timestamp - most_recent)
                    most_recent = timestamp
            if chunk.get("usage"):
                out["output_tokens"] = chunk["usage"].get("completion_tokens")
                out["prompt_tokens"] = chunk["usage"].get("prompt_tokens")
            most_recent_any = timestamp
        out["latency"] = most_recent_any - st
        out["ok"] = out["ttft"] > 0.0
    return out


async def _client_run(
    port: int, path: str, bodies: list[dict], schedule: list[float], concurrency: int | None = None
) -> list[dict]:
    url = f"http://127.0.0.1:{port}{path}"
    gate = asyncio.Semaphore(concurrency) if concurrency else None  # vLLM's --max-concurrency: a semaphore

    async def one(body: dict, at: float) -> dict:
        delay = start + at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if gate is None:
            return await _request(client, url, body, start, at)
        async with gate:
            return await _request(client, url, body, start, at)

    async with httpx.AsyncClient(timeout=600.0, limits=httpx.Limits(max_connections=None)) as client:
        start = time.perf_counter()
        return await asyncio.gather(*[one(b, at) for b, at in zip(bodies, schedule, strict=True)])


def client_medians(outs: list[dict]) -> dict:
    ok = [o for o in outs if o["ok"]]
    tpots = [(o["latency"] - o["ttft"]) / (o["output_tokens"] - 1) for o in ok if o["output_tokens"] > 1]
    return {
        "ttft": statistics.median(o["ttft"] for o in ok) * 1000.0,
        "tpot": statistics.median(tpots) * 1000.0,
        "tokens": [(o["prompt_tokens"], o["output_tokens"]) for o in outs],
    }


# ---- (A) the workload's own path --------------------------------------------------------------------------------


def ours(port: int, path: str, bodies: list[dict], schedule: list[float], concurrency: int | None = None) -> dict:
    run = load.drive(schedule, [[b] for b in bodies], lambda b: stream_request(port, path, b, 600.0), concurrency)
    _, figures, _ = load.figures(run, None, 1.0)
    per_request = [x for x in figures if "serve_ttft_ms" in x]  # not the per-unit send delays
    by_sent = sorted(run.requests, key=lambda r: r.t_sent)
    return {
        "ttft": statistics.median(x["serve_ttft_ms"] for x in per_request),
        "tpot": statistics.median(x["serve_tpot_ms"] for x in per_request if x["serve_tpot_ms"] is not None),
        "tokens": sorted((r.prompt_tokens, r.output_tokens) for r in by_sent),
    }


def ratio_ci(ratios: list[float]) -> tuple[float, float, float]:
    logs = [math.log(r) for r in ratios]
    m = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(m), math.nan, math.nan
    half = stats.t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def _pin(server_cpus: str) -> set[int]:
    """The server's CPUs; this process (both clients, and every thread they start) moves to the others."""
    try:
        server = {int(c) for c in server_cpus.split(",")}
    except ValueError:
        raise typer.BadParameter("a comma-separated list of CPU numbers", param_hint="--server-cpus") from None
    have = os.sched_getaffinity(0)
    rest = have - server
    if not server <= have or not rest:
        raise typer.BadParameter(
            f"CPUs {sorted(server)} of {sorted(have)}, leaving one or more", param_hint="--server-cpus"
        )
    os.sched_setaffinity(0, rest)
    return server


def main(
    model: str = typer.Option("smollm2-135m"),
    quant: str = typer.Option("q4", help="Quantization level"),
    engines: str = typer.Option("llama.cpp,mlx"),
    rounds: int = typer.Option(5),
    requests: int = typer.Option(16),
    rate: str = typer.Option(
        "4", help="Requests per second, Poisson; 'inf': all at once (a closed loop with --concurrency)"
    ),
    concurrency: int = typer.Option(0, help="At most this many requests in flight, both clients (0: no limit)"),
    max_tokens: int = typer.Option(32),
    prompt_tokens: int = typer.Option(256, help="Tokens of each prompt, cut from the shipped corpus"),
    server_cpus: str = typer.Option(
        "",
        help="Pin the server to these CPUs (taskset list, e.g. '0'; its threads = their count) and both clients to "
        "the others: on a small machine each client's own CPU otherwise slows the server it measures",
    ),
) -> None:
    console = Console(width=170)
    pinned = _pin(server_cpus) if server_cpus else None
    rate = "inf" if rate == "inf" else float(rate)
    limit = concurrency or None
    settings = load_settings()
    models_dir = settings.resolved_models_dir
    catalog = ModelCatalog(models_dir)
    spec = parse_sweep(
        {
            "name": "serve-client",
            "models": [model],
            "engines": engines.split(","),
            "quantizations": [quant],
            "workloads": [
                {
                    "kind": "serve",
                    "request_rate": [rate],
                    "max_concurrency": limit,
                    "max_tokens": max_tokens,
                    "num_requests": requests,
                    "slots": 4,
                }
            ],
            **({"engine_options": {"threads": len(pinned)}} if pinned else {}),
        }
    )
    table = Table(
        title=f"serve: ours ÷ independent client, {model} {quant}, {requests} requests at "
        f"{'once' if rate == 'inf' else f'{rate:g}/s'}{f', at most {limit} in flight' if limit else ''}, "
        f"{rounds} rounds ABBA (target ±{TARGET:.0%})"
        + (f", server on CPU {server_cpus}, clients on the others" if pinned else "")
    )
    for col in ("engine / server", "metric", "ours median", "client median", "ours ÷ client [95% CI]", "within 5 %"):
        table.add_column(col, justify="left" if col in ("engine / server", "metric") else "right")
    for job in expand(spec, catalog):
        p = job.params
        vocab = get_engine(job.engine)
        vocab.load_vocab(models_dir / job.artifact)
        banned = vocab.special_token_ids()
        # Every run its own prompts (equal lengths, different text): a server's prompt cache must not serve one path
        # what the other computed. Chat requests of one user message each, through the model's template.
        prompts = Prompts(vocab, prompt_tokens, 0)

        def bodies_for(run: int) -> list[dict]:
            return [
                body_of([{"role": "user", "content": prompts.text(run * requests + i)}], "chat", job.n_gen, banned)
                for i in range(requests)
            ]

        path = PATHS["chat"]
        port = free_port()
        cmd = command(job, models_dir / job.artifact, port, p["context_tokens"], slots=p.get("slots", 1))
        if pinned:
            cmd = ["taskset", "-c", ",".join(map(str, sorted(pinned))), *cmd]
        log = Path(f"/tmp/serve-client-{job.engine}.log")
        server = Server(job.engine, cmd, port, log)
        server.start()
        agree = True
        per = {"ttft": ([], []), "tpot": ([], [])}
        try:
            server.wait_ready(180)
            # warm-up: one whole run of each path, discarded (a server's first batches are slower: mlx_lm.server's first
            # 16-request run took 9.9 s to a first token, the next ones 0.7 s)
            warm = load.arrivals(requests, rate, seed=-1)
            ours(port, path, bodies_for(0), warm, limit)
            asyncio.run(_client_run(port, path, bodies_for(1), warm, limit))
            for r in range(rounds):
                schedule = load.arrivals(requests, rate, seed=r)
                order = ("A", "B") if r % 2 == 0 else ("B", "A")
                got = {}
                for k, who in enumerate(order):
                    bodies = bodies_for(2 + 2 * r + k)  # the first path of each round gets the even slice
                    got[who] = (
                        ours(port, path, bodies, schedule, limit)
                        if who == "A"
                        else client_medians(asyncio.run(_client_run(port, path, bodies, schedule, limit)))
                    )
                for m in per:
                    per[m][0].append(got["A"][m])
                    per[m][1].append(got["B"][m])
                # other prompts of the same length: output counts equal (max_tokens), prompt counts within a few
                agree &= all(out == max_tokens for _, out in got["A"]["tokens"] + got["B"]["tokens"])
                console.print(
                    f"{job.engine} round {r + 1}/{rounds}: TTFT {got['A']['ttft']:.1f} / {got['B']['ttft']:.1f} ms, "
                    f"TPOT {got['A']['tpot']:.2f} / {got['B']['tpot']:.2f} ms (ours / client)"
                )
        finally:
            server.stop(10.0)
        server_name = p.get("server") or "mlx_lm.server"
        for m, (a, b) in per.items():
            g, lo, hi = ratio_ci([x / y for x, y in zip(a, b, strict=True)])
            medians = statistics.median(a) / statistics.median(b)
            table.add_row(
                f"{job.engine} / {server_name}",
                m.upper() + " (ms)",
                f"{statistics.median(a):,.2f}",
                f"{statistics.median(b):,.2f}",
                f"{medians:.3f} (rounds: {g:.3f} [{lo:.3f}, {hi:.3f}])",
                "yes" if abs(medians - 1) <= TARGET else "NO",
            )
        table.add_row(
            f"{job.engine} / {server_name}",
            "output tokens (usage)",
            "",
            "",
            "= max_tokens, every request" if agree else "DIFFER",
            "yes" if agree else "NO",
        )
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
