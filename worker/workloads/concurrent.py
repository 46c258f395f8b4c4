"""The concurrent workload: N streaming clients at once against the engine's own server, one burst per repetition.

Each burst releases N client threads together (a barrier), each sending one streaming completion of a
different corpus slice (servers reuse cached prompt prefixes). Per request: TTFT, end-to-end latency and
every inter-token gap; per burst: aggregate output tokens/s, errors, and the peak memory of the server's
process tree, sampled on a thread every ``memory_interval_ms`` and, on Linux, read from the kernel's
per-process high-water mark as a check that the sampling caught the peak (see the metric registry).
"""

from __future__ import annotations

import threading

from ..measure.memory import PeakSampler, read_hwm, reset_hwm, tree
from ..serving.client import StreamResult, completion_body, stream_completion
from ..serving.server import Server, command, free_port
from .common import Context, Outcome, Prompts, SampleLog, done, engine_for, repetitions, vocab_engine


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


def run(ctx: Context) -> Outcome:
    job, p = ctx.job, ctx.job.params
    n = p["clients"]
    vocab = vocab_engine(ctx)
    banned = vocab.special_token_ids()
    prompts = Prompts(vocab, job.n_prompt, job.seed)
    # llama-cpp-python's server holds one sequence at a time; MLX's batches up to --decode-concurrency.
    n_ctx = job.n_prompt + job.n_gen + 32
    port = p["port"] or free_port()
    cmd = command(job.engine, ctx.artifact, port, job.engine_options, n_ctx, job.n_gen)
    server = Server(job.engine, cmd, port, ctx.workdir / "server.log", on_spawn=ctx.spawned)
    log = SampleLog()
    hwm_ok = True
    try:
        server.start()
        ready_s = server.wait_ready(p["ready_timeout_s"])
        pid = server.proc.pid
        for r, warm in repetitions(ctx):
            bodies = [completion_body(prompts.text(r * n + i), job.n_gen, banned) for i in range(n)]
            pids = [q.pid for q in tree(pid)]
            hwm_ok = reset_hwm(pids) and hwm_ok
            with PeakSampler(pid, p["memory_interval_ms"] / 1000.0) as sampler:
                results = burst(port, bodies, p["request_timeout_s"])
            hwm = read_hwm(pids) if hwm_ok else None
            good = [x for x in results if x.ok and x.n_tokens >= job.n_gen]
            for x in results:
                log.add({"request_ttft_ms": x.ttft_s * 1000.0 if x.ttft_s is not None else None,
                         "request_e2e_ms": (x.t_end - x.t_sent) * 1000.0 if x.ok else None}, warmup=warm)
                for gap in x.gaps_s():
                    log.add({"request_itl_ms": gap * 1000.0}, warmup=warm)
            span = max((x.t_end for x in good), default=0.0) - min(x.t_sent for x in results)
            log.add({"aggregate_output_tps": sum(x.n_tokens for x in good) / span if good else 0.0,
                     "request_errors": len(results) - len(good), "server_peak_rss_bytes": sampler.peak,
                     "server_hwm_rss_bytes": hwm}, warmup=warm)
            errors = [x.error for x in results if not x.ok]
            ctx.emit("burst", index=r, errors=errors[:3], samples=sampler.samples)
            done(ctx, r, warm)
    finally:
        stop_s, clean = server.stop(p["stop_timeout_s"])
    extra = {"clients": n, "ready_s": ready_s, "stop_s": stop_s, "clean_stop": clean, "n_ctx": n_ctx,
             "memory_interval_ms": p["memory_interval_ms"], "hwm_supported": hwm_ok,
             "server": "llama_cpp.server" if job.engine == "llama.cpp" else "mlx_lm.server", "server_args": cmd[2:]}
    return Outcome(samples=log.samples, engine=engine_for(job), extra=extra, own_peak=False)
