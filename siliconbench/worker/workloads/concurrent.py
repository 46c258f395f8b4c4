"""The concurrent workload: N streaming clients at once against the engine's own server, one burst per repetition.

Each burst releases N client threads together (a barrier), each sending one streaming completion of a
different corpus slice (servers reuse cached prompt prefixes). Per request: TTFT, end-to-end latency and
every inter-token gap; per burst: aggregate output tokens/s, errors, and the peak memory of the server's
process tree, sampled on a thread every ``memory_interval_ms`` and, on Linux, read from the kernel's
per-process high-water mark as a check that the sampling caught the peak (see the metric registry).

Both servers get the same request bodies (``completion_body``: no seed, greedy, penalties off). The result
records how the server is configured to serve concurrent requests (``extra.batching``: llama_cpp.server one
at a time, mlx_lm.server's batch sizes) and what the bursts showed (``extra.observed``): the most streams
that were between their first and last token at the same moment, and the fraction of requests that got
their first token while an earlier one was still streaming (0 when served one after another).
"""

from __future__ import annotations

import threading

from siliconbench.worker.measure.memory import TreeWindow
from siliconbench.worker.serving.client import StreamResult, completion_body, request_facts, stream_completion
from siliconbench.worker.serving.process import Server, free_port
from siliconbench.worker.serving.servers import batching, command, server_facts
from siliconbench.worker.workloads.common import (
    Context,
    Outcome,
    Prompts,
    SampleLog,
    done,
    engine_for,
    repetitions,
    vocab_engine,
)


def burst(port: int, bodies: list[dict], timeout_s: float) -> list[StreamResult]:
    """Send every body at once, one thread each; the results in body order."""
    results: list[StreamResult | None] = [None] * len(bodies)
    gate = threading.Barrier(len(bodies))

    def client(i: int) -> None:
        gate.wait()
        results[i] = stream_completion(port, bodies[i], timeout_s)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def overlap(results: list[StreamResult]) -> dict:
    """What one burst showed: did the streams run at the same time?

    ``in_flight``: the most streams between their first and last token chunk at one moment (1 when served
    one at a time). ``joined``: of the requests other than the first to stream, the fraction whose first
    token arrived before an earlier-streaming request's last token (None with fewer than two streams).
    """
    spans = sorted((x.token_times[0], x.token_times[-1]) for x in results if x.token_times)
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda e: (e[0], e[1]))
    now = most = 0
    for _, step in edges:  # at equal times an end comes before a start: touching is not overlapping
        now += step
        most = max(most, now)
    joined = sum(any(a < b0 for _, b0 in spans[:i]) for i, (a, _) in enumerate(spans) if i)
    return {"in_flight": most, "joined": joined / (len(spans) - 1) if len(spans) > 1 else None}


def run(ctx: Context) -> Outcome:
    job, p = ctx.job, ctx.job.params
    n = p["clients"]
    vocab = vocab_engine(ctx)
    banned = vocab.special_token_ids()
    prompts = Prompts(vocab, job.n_prompt, job.seed)
    # llama-server gives each client a slot and batches them; llama_cpp.server serves one request at a time;
    # mlx_lm.server batches up to --decode-concurrency
    # (requests carry no seed, which would make it serve them one at a time): see extra.batching.
    n_ctx = job.n_prompt + job.n_gen + 32
    port = p["port"] or free_port()
    cmd = command(job, ctx.artifact, port, n_ctx, slots=n)
    server = Server(job.engine, cmd, port, ctx.workdir / "server.log", on_spawn=ctx.spawned)
    log = SampleLog()
    hwm_ok = True
    bursts: list[dict] = []
    sources: dict[str, int] = {}
    body = None
    try:
        server.start()
        ready_s = server.wait_ready(p["ready_timeout_s"])
        pid = server.proc.pid
        for r, warm in repetitions(ctx):
            bodies = [completion_body(prompts.text(r * n + i), job.n_gen, banned) for i in range(n)]
            body = bodies[0]
            with TreeWindow(pid, p["memory_interval_ms"] / 1000.0, hwm_ok) as memory:
                results = burst(port, bodies, p["request_timeout_s"])
            hwm_ok = memory.hwm_ok
            seen = overlap(results)
            bursts.append({**seen, "warmup": warm})
            for x in results:
                if x.ok:
                    sources[x.token_source] = sources.get(x.token_source, 0) + 1
            good = [x for x in results if x.ok and x.n_tokens >= job.n_gen]
            for x in results:
                log.add(
                    {
                        "request_ttft_ms": x.ttft_s * 1000.0 if x.ttft_s is not None else None,
                        "request_e2e_ms": (x.t_end - x.t_sent) * 1000.0 if x.ok else None,
                    },
                    warmup=warm,
                )
                for gap in x.gaps_s():
                    log.add({"request_itl_ms": gap * 1000.0}, warmup=warm)
            span = max((x.t_end for x in good), default=0.0) - min(x.t_sent for x in results)
            log.add(
                {
                    "aggregate_output_tps": sum(x.n_tokens for x in good) / span if good else 0.0,
                    "request_errors": len(results) - len(good),
                    **memory.figures(),
                },
                warmup=warm,
            )
            errors = [x.error for x in results if not x.ok]
            ctx.emit("burst", index=r, errors=errors[:3], samples=memory.sampler.samples, **seen)
            done(ctx, r, warm)
    finally:
        stop_s, clean = server.stop(p["stop_timeout_s"])
    extra = {
        "clients": n,
        "ready_s": ready_s,
        "stop_s": stop_s,
        "clean_stop": clean,
        "memory_interval_ms": p["memory_interval_ms"],
        "hwm_supported": hwm_ok,
        **server_facts(job, cmd, n_ctx, slots=n),
        "batching": batching(job, n),
        # the body every request had (prompt aside), the same for both servers
        "request": request_facts(body) if body else None,
        # successful requests by where their token count came from (client.py: usage / finish_length /
        # chunks); 'chunks' is a lower bound, never the count of a server that reported one
        "token_count_source": sources,
        "observed": observed(bursts),
    }
    return Outcome(samples=log.samples, engine=engine_for(job), extra=extra, own_peak=False)


def observed(bursts: list[dict]) -> dict:
    """The measured bursts' overlap (warm-up bursts left out), and whether the server batched them."""
    measured = [b for b in bursts if not b["warmup"]] or bursts
    joined = [b["joined"] for b in measured if b["joined"] is not None]
    most = max((b["in_flight"] for b in measured), default=0)
    return {
        "max_streams_in_flight": most,
        "joined_fraction": sum(joined) / len(joined) if joined else None,
        "per_burst": [{"in_flight": b["in_flight"], "joined": b["joined"]} for b in measured],
        "batched": most > 1,
    }
