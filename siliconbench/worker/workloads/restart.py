"""The restart workload: the engine's own server started, ready, first streamed token, stopped; repeated.

"Ready" means the model is loaded: the server answered a 1-token completion (``Server.wait_ready``).
mlx_lm.server binds at once and loads the model in a thread at start-up, its /health answering during the
load, so /health would say ready too early; llama_cpp.server binds only once it has loaded the model.

A background client keeps sending small streaming requests the whole time (as production traffic
would); each is attributed to the restart whose window it was sent in (from the previous server's stop
signal, or the first spawn, until the new server's first token), so requests that fail while the server
is down are counted, not hidden. Every server is stopped and its process group checked empty.
"""

from __future__ import annotations

import threading
import time

from siliconbench.contract.errors import WorkloadError

from siliconbench.worker.serving.client import completion_body, request_facts, stream_completion
from siliconbench.worker.serving.process import Server, free_port
from siliconbench.worker.serving.servers import command, server_facts
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

PROBE_TIMEOUT_S = 30.0  # one background request; a server that takes longer is failing it


class Traffic:
    """One small streaming request every ``interval_s``, each on its own thread so that a slow one delays none."""

    def __init__(self, interval_s: float, body: dict):
        self.interval_s, self.body = interval_s, body
        self.port = 0
        self.sent: list[tuple[float, bool]] = []  # (t_sent, ok) once answered
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _one(self, port: int) -> None:
        res = stream_completion(port, self.body, PROBE_TIMEOUT_S)
        self.sent.append((res.t_sent, res.ok))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            t = threading.Thread(target=self._one, args=(self.port,), daemon=True)
            t.start()
            self._threads.append(t)

    def start(self) -> None:
        threading.Thread(target=self._run, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(PROBE_TIMEOUT_S + 1)

    def in_window(self, t0: float, t1: float) -> tuple[int, int]:
        mine = [ok for t, ok in self.sent if t0 <= t < t1]
        return len(mine), sum(not ok for ok in mine)


def run(ctx: Context) -> Outcome:
    job, p = ctx.job, ctx.job.params
    vocab = vocab_engine(ctx)
    banned = vocab.special_token_ids()
    prompts = Prompts(vocab, job.n_prompt, job.seed)
    n_ctx = job.n_prompt + job.n_gen + 32  # the server's prompts are text: allow a few tokens of drift
    # One address for every restart, as clients of a real server have: while it is down, they are refused.
    port = p["port"] or free_port()
    traffic = None
    if p["client_interval_ms"]:
        traffic = Traffic(p["client_interval_ms"] / 1000.0, completion_body(prompts.text(10_000), 1, banned))
        traffic.port = port
        traffic.start()
    log = SampleLog()
    windows, unclean, server, body = [], 0, None, None
    t_window = time.perf_counter()
    try:
        for r, warm in repetitions(ctx):
            cmd = command(job, ctx.artifact, port, n_ctx, slots=1)
            server = Server(job.engine, cmd, port, ctx.workdir / f"server-{r}.log", on_spawn=ctx.spawned)
            t_spawn = server.start()
            ready_s = server.wait_ready(p["ready_timeout_s"])
            body = completion_body(prompts.text(2 * r), job.n_gen, banned)
            first = stream_completion(port, body, p["ready_timeout_s"])
            if not first.ok:
                raise WorkloadError(f"the first request after start failed: {first.error}")
            t_first = first.token_times[0]
            warm_req = stream_completion(
                port, completion_body(prompts.text(2 * r + 1), job.n_gen, banned), p["ready_timeout_s"]
            )
            windows.append((t_window, t_first))
            t_window = time.perf_counter()  # the next window opens with this server's stop signal
            stop_s, clean = server.stop(p["stop_timeout_s"])
            server = None
            unclean += not clean
            log.add(
                {
                    "restart_ready_s": ready_s,
                    "restart_first_token_s": t_first - t_spawn,
                    "restart_warm_ttft_ms": warm_req.ttft_s * 1000.0 if warm_req.ok else None,
                    "restart_stop_s": stop_s,
                },
                warmup=warm,
            )
            done(ctx, r, warm)
    finally:
        if server is not None:
            server.stop(p["stop_timeout_s"])
        if traffic:
            traffic.stop()
    if traffic:  # the requests of each window are known only once every one of them was answered
        for s, (t0, t1) in zip(log.samples, windows, strict=False):
            n, failed = traffic.in_window(t0, t1)
            s.values.update({"restart_requests": float(n), "restart_failed_requests": float(failed)})
    extra = {
        "unclean_stops": unclean,
        "traffic_interval_ms": p["client_interval_ms"],
        **server_facts(job, cmd, n_ctx, slots=1),
        "request": request_facts(body) if body else None,
    }  # the body of the timed requests (prompt aside), as both servers get
    return Outcome(samples=log.samples, engine=engine_for(job), extra=extra, own_peak=False)
