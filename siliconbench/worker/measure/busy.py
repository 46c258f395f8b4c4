"""The busy gate beside the thermal gate (siliconbench/worker/measure/gate.py): is anything else using the machine, and did
anything while the job ran?

A busy core slows llama.cpp's spinning threads up to 15x here (measured on this project's 2-core VM); Mac minis in a fleet run
Spotlight, Time Machine, updates and other people's builds. Before each job (in the worker's process, outside
every timed region) the gate reads, over WINDOW_S:

- other processes' CPU: the system's busy CPU time less this process's and its children's, as a share of
  all cores (steal time, a hypervisor giving the core to another VM, counts as busy);
- memory pressure (Linux PSI ``/proc/pressure/memory`` some avg10; macOS ``kern.memorystatus_level``);
- swap activity (pages swapped in or out during the window).

The sweep's ``busy`` policy then: ``wait`` (default) polls until the machine is quiet, at most
``busy_timeout_s``, then runs either way, recording the wait; ``record`` runs at once; ``refuse`` fails the
job at once while the machine is busy. During the job the parent measures the same CPU share (its children's
CPU comes from ``getrusage(RUSAGE_CHILDREN)``, so the job's own processes are never "others") and the steal
time. A job during which others used over SILICONBENCH_BUSY_CPU_PCT of the cores (default 25), or steal was over STEAL_PCT, is
``contended``: a disturbed result, like a throttled one (siliconbench.contract.results.JobResult.disturbed), left out of
Compare and regression verdicts unless asked. The record is the result's ``extra.busy``.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.settings import BUSY_CPU_PCT

from siliconbench.worker import platform
from siliconbench.worker.measure import gate

WINDOW_S = 0.3  # long enough to see a busy core; PSI's own window is 10 s
POLL_S = 2.0
STEAL_PCT = 10.0
PRESSURE_PCT = 10.0  # PSI some avg10, or 100 - memorystatus_level on a Mac


@dataclass
class CpuMark:
    """CPU time counters at one moment: the system's, this process's, its waited-for children's."""

    wall: float
    busy: float
    steal: float
    own: float
    swapped: int

    @classmethod
    def now(cls) -> CpuMark:
        c = psutil.cpu_times()
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        steal = getattr(c, "steal", 0.0)
        busy = c.user + c.system + getattr(c, "nice", 0.0) + getattr(c, "irq", 0.0) + getattr(c, "softirq", 0.0) + steal
        sw = psutil.swap_memory()
        return cls(
            wall=time.monotonic(),
            busy=busy,
            steal=steal,
            own=me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
            swapped=int(sw.sin + sw.sout),
        )

    def since(self, start: CpuMark) -> dict:
        """Others' CPU and steal as a share of all cores, and bytes swapped, from ``start`` to this mark."""
        capacity = max(self.wall - start.wall, 1e-6) * (psutil.cpu_count() or 1)
        others = (self.busy - start.busy) - (self.own - start.own)
        return {
            "others_cpu_pct": round(max(0.0, 100.0 * others / capacity), 1),
            "steal_pct": round(max(0.0, 100.0 * (self.steal - start.steal) / capacity), 1),
            "swapped_bytes": max(0, self.swapped - start.swapped),
            "seconds": round(self.wall - start.wall, 3),
        }


def sample(window_s: float = WINDOW_S, sleep: Callable[[float], None] = time.sleep) -> dict:
    """The machine's load over ``window_s``: others' CPU, steal, swap, memory pressure, and whether it is busy."""
    start = CpuMark.now()
    sleep(window_s)
    out = CpuMark.now().since(start)
    out["memory_pressure_pct"] = platform.current().memory_pressure_pct()
    out["busy"] = reasons(out)
    return out


def busy_cpu_pct() -> float:
    """SILICONBENCH_BUSY_CPU_PCT (validated with the other settings at worker start), else the default: one busy
    core of a 4-core machine, half of one on 2 cores."""
    try:
        return float(os.environ.get("SILICONBENCH_BUSY_CPU_PCT", BUSY_CPU_PCT))
    except ValueError:
        return BUSY_CPU_PCT


def reasons(load: dict) -> list[str]:
    why = []
    if load.get("others_cpu_pct", 0) > busy_cpu_pct():
        why.append(f"other processes used {load['others_cpu_pct']:.0f}% of the cores")
    if load.get("steal_pct", 0) > STEAL_PCT:
        why.append(f"the hypervisor stole {load['steal_pct']:.0f}% of the cores")
    if (load.get("memory_pressure_pct") or 0) > PRESSURE_PCT:
        why.append(f"memory pressure {load['memory_pressure_pct']:.0f}%")
    if load.get("swapped_bytes", 0) > 0:
        why.append(f"{load['swapped_bytes'] / 2**20:.1f} MiB swapped")
    return why


class BusyGate:
    """siliconbench/worker/measure/gate.py's interface: bad while other processes keep the machine busy (``reasons``)."""

    name, poll_s = "busy", POLL_S

    def read(self, sleep: Callable[[float], None]) -> dict:
        return sample(sleep=sleep)

    def bad(self, state: dict) -> list[str]:
        return state["busy"]

    def refusal(self, state: dict) -> str:
        return (
            f"busy: refuse: the host is busy now ({'; '.join(state['busy'])}); the job did not run. "
            "Run it when the machine is quiet, or use busy: wait."
        )


def before_job(
    job: JobSpec, sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic
) -> dict:
    """Apply the job's busy gate; the record so far (``start``, ``waited_s``, ``timed_out``, and the CPU ``mark``
    the job's own share is measured from). Raises GateRefused."""
    return {**gate.hold(BusyGate(), job, sleep, clock), "mark": CpuMark.now()}


def after_job(record: dict) -> dict:
    """The full record: what others took while the job ran, and ``contended`` if that was real load."""
    mark: CpuMark = record.pop("mark")
    during = CpuMark.now().since(mark)
    why = [r for r in reasons(during) if "swapped" not in r or during["swapped_bytes"] > 64 << 20]
    return {**record, "during": during, "contended": bool(why), "why": why}
