"""Open-loop load against a server, as vLLM's ``bench serve`` makes it: seeded Poisson arrivals, each unit of work
(a request, or a conversation's turns one after another) on its own thread, and one run's figures computed with
vLLM's arithmetic (vllm/benchmarks/serve.py ``get_request`` and ``calculate_metrics``)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from siliconbench.worker.serving.client import ServedRequest

INF = "inf"


def arrivals(n: int, rate: float | str, seed: int) -> list[float]:
    """Seconds after the run's start at which each of ``n`` units is sent. Rate 'inf': all at 0. Otherwise
    exponential gaps (vLLM's gamma with burstiness 1) from a seeded generator, cumulated, then scaled so that the
    last comes at n / rate exactly, as vLLM does to keep the throughput of different seeds comparable."""
    if rate == INF:
        return [0.0] * n
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        t += rng.expovariate(float(rate))
        out.append(t)
    scale = (n / float(rate)) / out[-1]
    return [x * scale for x in out]


@dataclass
class Run:
    """One run: every request's record, when each unit was sent, and the run's span."""

    requests: list[ServedRequest] = field(default_factory=list)
    t0: float = 0.0
    t_end: float = 0.0
    sends: list[float] = field(default_factory=list)  # perf_counter of each request sent

    @property
    def duration_s(self) -> float:
        return self.t_end - self.t0


def drive(
    schedule: list[float],
    units: list[list[dict]],
    send: Callable[[dict], ServedRequest],
    max_concurrency: int | None,
) -> Run:
    """Send ``units[i]`` at ``schedule[i]`` (its requests in order, each after the previous one ended); at most
    ``max_concurrency`` requests in flight. Returns when every request has ended."""
    run = Run()
    gate = threading.BoundedSemaphore(max_concurrency) if max_concurrency else None
    lock = threading.Lock()

    def unit(bodies: list[dict]) -> None:
        for body in bodies:
            if gate:
                gate.acquire()
            try:
                r = send(body)  # its t_sent is taken after the gate, as vLLM's request function takes it
            finally:
                if gate:
                    gate.release()
            with lock:
                run.requests.append(r)
                run.sends.append(r.t_sent)
            if not r.ok:
                break  # a later turn without this answer would not be the conversation asked

    threads = []
    run.t0 = time.perf_counter()
    for at, bodies in zip(schedule, units, strict=True):
        wait = run.t0 + at - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        t = threading.Thread(target=unit, args=(bodies,), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    run.t_end = time.perf_counter()
    return run


def figures(run: Run, slo: dict | None, rate: float | str) -> tuple[dict, list[dict], list[float]]:
    """(the run's figures, each successful request's figures, every inter-token gap in ms), by vLLM's definitions
    (siliconbench.contract.metrics serve_*)."""
    good = [r for r in run.requests if r.ok]
    per_request, gaps = [], []
    met = 0
    for r in good:
        ttft, e2el = r.ttft_s * 1000.0, r.e2el_s * 1000.0
        # vLLM: TPOT only where more than one token came; for goodput a one-token answer's TPOT is 0
        tpot = (e2el - ttft) / (r.output_tokens - 1) if r.output_tokens > 1 else None
        per_request.append(
            {
                "serve_ttft_ms": ttft,
                "serve_tpot_ms": tpot,
                "serve_e2el_ms": e2el,
                "serve_prompt_tokens": r.prompt_tokens,
                "serve_output_tokens": r.output_tokens,
                "serve_cached_prompt_tokens": r.cached_tokens,
            }
        )
        gaps += [g * 1000.0 for g in r.itls_s()]
        if slo and meets(slo, ttft, tpot or 0.0, e2el):
            met += 1
    dur = run.duration_s
    prompt = sum(r.prompt_tokens or 0 for r in good)
    output = sum(r.output_tokens for r in good)
    cached = [r.cached_tokens for r in good if r.cached_tokens is not None]
    last_send = max(run.sends, default=run.t0) - run.t0
    out = {
        "serve_request_throughput": len(good) / dur,
        "serve_output_throughput": output / dur,
        "serve_total_token_throughput": (prompt + output) / dur
        if all(r.prompt_tokens is not None for r in good)
        else None,
        "serve_failed_requests": len(run.requests) - len(good),
        # rate 'inf' sends everything at once: there is no achieved rate to speak of
        "serve_sent_rate": len(run.sends) / last_send if rate != INF and last_send > 0 else None,
        "serve_request_goodput": met / dur if slo else None,
        "serve_prompt_reuse_pct": 100.0 * sum(cached) / prompt if cached and prompt else None,
    }
    return out, per_request, gaps


def meets(slo: dict, ttft_ms: float, tpot_ms: float, e2el_ms: float) -> bool:
    """Every objective asked is met (vLLM: ``slo >= value``)."""
    have = {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms, "e2el_ms": e2el_ms}
    return all(have[k] <= v for k, v in slo.items())
