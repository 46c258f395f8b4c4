"""Open-loop load against a server, as vLLM's ``bench serve`` makes it: seeded Poisson arrivals, each unit of work
(a request, or a conversation's turns one after another) on its own thread, and one run's figures computed with
vLLM's arithmetic (vllm/benchmarks/serve.py ``get_request`` and ``calculate_metrics``)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from siliconbench.contract.aggregate import percentile

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
    # Per unit (a request, or a conversation): when its first request was sent (after any max_concurrency wait), how
    # late its thread began against its scheduled arrival (the client's own lag, before that wait), and whether all
    # of its requests succeeded.
    unit_sends: list[float] = field(default_factory=list)
    send_delays_s: list[float] = field(default_factory=list)
    units_done: int = 0

    @property
    def duration_s(self) -> float:
        return self.t_end - self.t0


def failed_request(exc: BaseException) -> ServedRequest:
    """A request whose sending raised: failed, with the exception as its error, so no failure goes uncounted."""
    return ServedRequest(t_sent=time.perf_counter(), error=f"{type(exc).__name__}: {exc}")


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

    def unit(scheduled: float, bodies: list[dict]) -> None:
        lag = max(0.0, time.perf_counter() - scheduled)
        with lock:
            run.send_delays_s.append(lag)
        for turn, body in enumerate(bodies):
            if gate:
                gate.acquire()
            try:
                r = send(body)  # its t_sent is taken after the gate, as vLLM's request function takes it
            except Exception as exc:  # any failure is a failed request, never a thread that dies uncounted
                r = failed_request(exc)
            finally:
                if gate:
                    gate.release()
            with lock:
                run.requests.append(r)
                run.sends.append(r.t_sent)
                if turn == 0:
                    run.unit_sends.append(r.t_sent)
            if not r.ok:
                return  # a later turn without this answer would not be the conversation asked
        with lock:
            run.units_done += 1

    threads = []
    run.t0 = time.perf_counter()
    for at, bodies in zip(schedule, units, strict=True):
        wait = run.t0 + at - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        t = threading.Thread(target=unit, args=(run.t0 + at, bodies), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    run.t_end = time.perf_counter()
    return run


# The client fell behind when its p99 lateness against the schedule exceeds this share of the mean gap between
# arrivals, or BEHIND_FLOOR_S where arrivals come all at once or closer than that: its figures then measure the client.
BEHIND_SHARE = 0.10
BEHIND_FLOOR_S = 0.010


def client_lag(run: Run, rate: float | str) -> dict:
    """How late the client started its units against their schedule (GuideLLM's scheduler metrics): p50 and p99 in
    ms, and whether that lag is large enough to flag the run (then its latencies are partly the client's)."""
    delays = run.send_delays_s
    if not delays:
        return {"send_delay_p50_ms": None, "send_delay_p99_ms": None, "client_behind": False}
    p50, p99 = percentile(delays, 50), percentile(delays, 99)
    gap = 1.0 / float(rate) if rate != INF else 0.0
    limit = max(BEHIND_FLOOR_S, BEHIND_SHARE * gap)
    return {
        "send_delay_p50_ms": round(p50 * 1000.0, 3),
        "send_delay_p99_ms": round(p99 * 1000.0, 3),
        "client_behind": p99 > limit,
        "behind_limit_ms": round(limit * 1000.0, 3),
    }


def figures(
    run: Run, slo: dict | None, rate: float | str, multi_turn: bool = False
) -> tuple[dict, list[dict], list[float]]:
    """(the run's figures, per-request and per-unit figures, every inter-token gap in ms), by vLLM's definitions
    (siliconbench.contract.metrics serve_*). With ``multi_turn`` a unit is a conversation: its rate and throughput
    are given apart from the turns' (each turn is one request)."""
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
                "serve_server_prompt_ms": r.server_prompt_ms,
                "serve_server_decode_ms": r.server_decode_ms,
            }
        )
        gaps += [g * 1000.0 for g in r.itls_s()]
        if slo and meets(slo, ttft, tpot or 0.0, e2el):
            met += 1
    per_request += [{"serve_send_delay_ms": d * 1000.0} for d in run.send_delays_s]
    dur = run.duration_s
    prompt = sum(r.prompt_tokens or 0 for r in good)
    output = sum(r.output_tokens for r in good)
    cached = [r.cached_tokens for r in good if r.cached_tokens is not None]
    # rate 'inf' sends everything at once: there is no achieved rate to speak of
    finite = rate != INF
    last_unit = max(run.unit_sends, default=run.t0) - run.t0
    last_send = max(run.sends, default=run.t0) - run.t0
    out = {
        "serve_request_throughput": len(good) / dur,
        "serve_output_throughput": output / dur,
        "serve_total_token_throughput": (prompt + output) / dur
        if all(r.prompt_tokens is not None for r in good)
        else None,
        "serve_failed_requests": len(run.requests) - len(good),
        # units (requests; with multi_turn, conversations) as request_rate counts them
        "serve_sent_rate": len(run.unit_sends) / last_unit if finite and last_unit > 0 else None,
        "serve_sent_turn_rate": len(run.sends) / last_send if multi_turn and finite and last_send > 0 else None,
        "serve_conversation_throughput": run.units_done / dur if multi_turn else None,
        "serve_request_goodput": met / dur if slo else None,
        "serve_prompt_reuse_pct": 100.0 * sum(cached) / prompt if cached and prompt else None,
    }
    return out, per_request, gaps


def meets(slo: dict, ttft_ms: float, tpot_ms: float, e2el_ms: float) -> bool:
    """Every objective asked is met (vLLM: ``slo >= value``)."""
    have = {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms, "e2el_ms": e2el_ms}
    return all(have[k] <= v for k, v in slo.items())
