"""A serving run's steady-state window (ML.ENERGY's: full server to first drain after the last send) and its joules
per token. The requests are records as the client writes them; the counter is a board at a constant draw read from
the clock, sampled by the real trace thread (this machine has no GPU energy counter)."""

from __future__ import annotations

import time

import pytest

from siliconbench.worker.serving.client import ServedRequest
from siliconbench.worker.serving.energy import EnergyTrace, steady_energy, steady_window

WATTS = 250.0


class ConstantBoard:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def energy_mj(self) -> int:
        return int((time.perf_counter() - self.t0) * WATTS * 1000)


def request(sent: float, last: float, chunks: int = 0, tokens: int | None = None) -> ServedRequest:
    step = (last - sent) / max(chunks, 1)
    times = [sent + step * (i + 1) for i in range(chunks)]
    return ServedRequest(t_sent=sent, ok=True, chunk_times=times, t_last=last, output_tokens=tokens or chunks)


def test_the_window_opens_when_the_server_is_full_and_closes_at_the_first_drain_after_the_last_send():
    runs = [request(0, 3), request(0.5, 2), request(1, 4), request(2.5, 5)]
    assert steady_window(runs, 2) == (0.5, 4)  # at 4 s one request is left, after the last send at 2.5 s
    assert steady_window(runs, 3) == (1, 3)
    assert steady_window(runs, 4) is None  # never four at once: a server never filled has no steady state
    assert steady_window(runs[:1], 2) is None


def test_joules_per_token_count_only_the_tokens_that_arrived_inside_the_window():
    with EnergyTrace(ConstantBoard(), interval_s=0.01) as trace:
        t = time.perf_counter()
        time.sleep(0.8)
    # two requests in flight from t to t + 0.8, 40 one-token chunks each; a third ends before the window opens
    runs = [request(t, t + 0.8, 40), request(t, t + 0.8, 40), request(t - 0.3, t - 0.1, 10)]
    out = steady_energy(runs, 2, trace)
    assert out["serve_steady_gpu_watts"] == pytest.approx(WATTS, rel=0.05)
    assert out["serve_steady_j_per_token"] == pytest.approx(WATTS * 0.8 / 80, rel=0.05)
    # chunks carrying two tokens each: half the joules per token
    doubled = [request(t, t + 0.8, 40, tokens=80), request(t, t + 0.8, 40, tokens=80)]
    assert steady_energy(doubled, 2, trace)["serve_steady_j_per_token"] == pytest.approx(WATTS * 0.8 / 160, rel=0.05)


def test_no_figure_from_a_window_too_short_or_outside_the_trace():
    with EnergyTrace(ConstantBoard(), interval_s=0.01) as trace:
        t = time.perf_counter()
        time.sleep(0.2)
    assert steady_energy([request(t, t + 0.2, 5), request(t, t + 0.2, 5)], 2, trace) == {}  # < 0.5 s
    late = [request(t + 10, t + 11, 5), request(t + 10, t + 11, 5)]
    assert steady_energy(late, 2, trace) == {}  # the counter was not sampled then
