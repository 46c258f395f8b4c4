"""A serving run's steady-state energy per token, as ML.ENERGY's leaderboard windows it: from the moment the server
holds as many requests as it can run at once until, after the last request was sent, it holds fewer again (ramp-up
and drain left out). The GPU's energy counter is sampled through the run in a thread (the board's counter: the
server's work, whatever process does it); the window is found afterwards from the requests' own times, and the
counter read at its edges by interpolation between samples.
"""

from __future__ import annotations

import bisect
import threading
import time

from siliconbench.worker.serving.client import ServedRequest

SAMPLE_S = 0.02  # the counter itself moves every ~10-100 ms
MIN_WINDOW_S = 0.5  # shorter, and the counter's steps are a large share of what it reads


class EnergyTrace:
    """(perf_counter, mJ) pairs of a meter's energy counter every SAMPLE_S while the ``with`` block runs."""

    def __init__(self, meter, interval_s: float = SAMPLE_S):
        self.meter, self.interval_s = meter, interval_s
        self.times: list[float] = []
        self.mj: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> None:
        e = self.meter.energy_mj()
        if e is not None:
            self.times.append(time.perf_counter())
            self.mj.append(float(e))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._read()
            self._stop.wait(self.interval_s)

    def __enter__(self) -> EnergyTrace:
        self._read()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=1)
        self._read()

    def at(self, t: float) -> float | None:
        """The counter at ``t``, interpolated between the samples around it (None outside the trace)."""
        if len(self.times) < 2 or not self.times[0] <= t <= self.times[-1]:
            return None
        i = min(max(bisect.bisect_right(self.times, t), 1), len(self.times) - 1)
        t0, t1, e0, e1 = self.times[i - 1], self.times[i], self.mj[i - 1], self.mj[i]
        return e0 if t1 == t0 else e0 + (e1 - e0) * (t - t0) / (t1 - t0)


def steady_window(requests: list[ServedRequest], capacity: int) -> tuple[float, float] | None:
    """(open, close): the first moment ``capacity`` requests are in flight, and the first moment after the last send
    that fewer are. None where the run never filled the server (a low rate, fewer requests than its capacity)."""
    spans = [(r.t_sent, r.t_last if r.t_last is not None else r.t_sent) for r in requests]
    if capacity < 1 or len(spans) < capacity:
        return None
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    last_send = max(s for s, _ in spans)
    in_flight, opened = 0, None
    for t, step in events:
        in_flight += step
        if opened is None and in_flight >= capacity:
            opened = t
        elif opened is not None and t >= last_send and in_flight < capacity:
            return opened, t
    return None


def steady_energy(requests: list[ServedRequest], capacity: int, trace: EnergyTrace) -> dict[str, float]:
    """serve_steady_j_per_token and serve_steady_gpu_watts of one run (empty where no window of MIN_WINDOW_S
    or more exists, or the trace does not cover it). Tokens in the window: each request's text-carrying chunks that
    arrived inside it, each worth the request's output tokens / its chunks (a chunk may carry several tokens)."""
    window = steady_window([r for r in requests if r.ok], capacity)
    if window is None or window[1] - window[0] < MIN_WINDOW_S:
        return {}
    opened, closed = window
    e0, e1 = trace.at(opened), trace.at(closed)
    if e0 is None or e1 is None or e1 <= e0:
        return {}
    tokens = 0.0
    for r in requests:
        if r.ok and r.chunk_times and r.output_tokens:
            inside = sum(1 for t in r.chunk_times if opened <= t <= closed)
            tokens += inside * r.output_tokens / len(r.chunk_times)
    if not tokens:
        return {}
    joules = (e1 - e0) / 1000.0
    return {"serve_steady_j_per_token": joules / tokens, "serve_steady_gpu_watts": joules / (closed - opened)}
