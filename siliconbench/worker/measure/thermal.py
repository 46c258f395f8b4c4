"""The thermal gate around each job (siliconbench/worker/measure/gate.py): thermal state and power read at start and end.

A fanless MacBook Air throttles within minutes, and a Mac on battery or in Low Power Mode runs slower; a
result measured that way must say so. Before a job (outside every timed region, in the worker's process):

- ``wait`` (default): poll until the state is nominal, at most ``thermal_timeout_s``; then run either way,
  the wait and whether it timed out recorded.
- ``record``: run at once.
- ``refuse``: a throttled host fails the job at once with that reason (rerun it later, or elsewhere).

After the job the state is read again. ``throttled`` in the record is true when either reading said
throttled: such results are marked, and the dashboard leaves them out unless asked. An ``unknown`` state
(a Linux VM without thermal zones) is not throttled: there is nothing to wait for.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from siliconbench.contract.jobs import JobSpec

from siliconbench.worker import platform
from siliconbench.worker.measure import gate

POLL_S = 5.0
KEPT = (
    "thermal_state",
    "power_source",
    "low_power_mode",
    "battery_percent",
    "max_temp_c",  # both platforms
    "cpu_speed_limit",
    "thermal_warning_level",
    "performance_warning_level",
)  # pmset on a Mac


def reading(read: Callable[[], dict] | None = None) -> dict:
    """The thermal and power facts a result keeps (the platform's raw extras dropped), read now."""
    state = (read or platform.current().thermal_power)()
    return {k: state.get(k) for k in KEPT if k in state}


class ThermalGate:
    """siliconbench/worker/measure/gate.py's interface: bad while the host reads throttled."""

    name, poll_s = "thermal", POLL_S

    def __init__(self, read: Callable[[], dict] | None = None):
        self._read = read

    def read(self, sleep: Callable[[float], None]) -> dict:
        return reading(self._read)

    def bad(self, state: dict) -> list[str]:
        return ["the host is throttled"] if state.get("thermal_state") == "throttled" else []

    def refusal(self, state: dict) -> str:
        return (
            f"thermal: refuse: the host is throttled now ({_shown(state)}); the job did not run. "
            "Let it cool (delay_s), or use thermal: wait."
        )


def before_job(
    job: JobSpec,
    read: Callable[[], dict] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict:
    """Apply the job's thermal gate; the record so far (``start``, ``waited_s``, ``timed_out``). Raises GateRefused."""
    return gate.hold(ThermalGate(read), job, sleep, clock)


def after_job(record: dict, read: Callable[[], dict] | None = None) -> dict:
    """The full record: ``end`` read now, and ``throttled`` if the job began or ended throttled."""
    end = reading(read)
    states = (record["start"].get("thermal_state"), end.get("thermal_state"))
    return {
        **record,
        "end": end,
        "throttled": "throttled" in states,
        "on_battery": "battery" in (record["start"].get("power_source"), end.get("power_source")),
        "low_power_mode": bool(record["start"].get("low_power_mode") or end.get("low_power_mode")),
    }


def _shown(state: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in state.items() if v is not None)
