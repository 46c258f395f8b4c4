"""The gates a job passes before it runs: one interface, two gates (``thermal``: is the host throttled?; ``busy``:
are other processes using it?), one loop.

Each gate reads the host's state, says why that state is bad (nothing: it is fine), and applies the sweep's mode:
``wait`` polls until the state is fine, at most the gate's timeout, then runs either way with the wait recorded;
``record`` runs at once; ``refuse`` fails the job at once while the state is bad. After the job each gate adds its
verdict to its record (``throttled``, ``contended``); a result with either verdict is *disturbed*
(siliconbench.contract.results.JobResult.disturbed): kept, marked, and left out of Compare and regression verdicts unless asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from siliconbench.contract.jobs import JobSpec


class GateRefused(RuntimeError):
    """The job's gate is ``refuse`` and the host's state is bad now."""


class Gate(Protocol):
    name: str  # the sweep's setting and the job's field that holds its mode (thermal, busy)
    poll_s: float

    def read(self, sleep: Callable[[float], None]) -> dict:
        """The state now (for ``busy``, over a short window, hence ``sleep``)."""

    def bad(self, state: dict) -> list[str]:
        """Why ``state`` is not fit to measure in; empty when it is."""

    def refusal(self, state: dict) -> str:
        """The failed job's reason under mode refuse."""


def hold(
    gate: Gate, job: JobSpec, sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic
) -> dict:
    """Apply ``gate`` in the job's mode; the record so far (``mode``, ``start``, ``waited_s``, ``timed_out``).
    Raises GateRefused under mode refuse while the state is bad."""
    mode, timeout_s = getattr(job, gate.name), getattr(job, f"{gate.name}_timeout_s")
    t0 = clock()
    state = gate.read(sleep)
    if mode == "refuse" and gate.bad(state):
        raise GateRefused(gate.refusal(state))
    timed_out = False
    if mode == "wait":
        while gate.bad(state):
            if clock() - t0 >= timeout_s:
                timed_out = True
                break
            sleep(min(gate.poll_s, max(0.0, timeout_s - (clock() - t0))))
            state = gate.read(sleep)
    return {"mode": mode, "start": state, "waited_s": round(clock() - t0, 3), "timed_out": timed_out}
