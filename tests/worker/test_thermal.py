"""The thermal gate: wait / record / refuse, on pmset outputs recorded on real Macs (tests/data/darwin),
replayed through the Darwin platform module; and a real job on this machine carrying its thermal record."""

from __future__ import annotations

import pytest

from siliconbench.contract.spec import parse_sweep

from siliconbench.worker.job.child import run_in_child
from siliconbench.worker.measure import thermal
from siliconbench.worker.platform.darwin import Darwin
from tests.conftest import SMALL
from tests.worker.darwin_outputs import Recorded
from tests.workload_helpers import jobs_for

THROTTLED = "pmset_thermlog_throttled_menumeters158.txt"  # CPU_Speed_Limit 28: a throttled Mac
NOMINAL = "pmset_therm_m1pro_stats749.txt"  # an M1 Pro with no warning level recorded
ON_BATTERY = "pmset_batt_battery_spaceship640.txt"


class Mac:
    """A Mac whose `pmset -g therm` answers from recorded outputs in turn (the last one repeats), with a clock
    that moves only when the gate sleeps."""

    def __init__(self, *therm: str, batt: str = ON_BATTERY):
        self.therm, self.batt, self.reads, self.now = list(therm), batt, 0, 0.0

    def read(self) -> dict:
        name = self.therm[min(self.reads, len(self.therm) - 1)]
        self.reads += 1
        return Darwin(
            Recorded(
                outputs={
                    ("pmset", "-g", "therm"): name,
                    ("pmset", "-g", "batt"): self.batt,
                    ("pmset", "-g"): "pmset_g_arm64_aldente603.txt",
                }
            )
        ).thermal_power()

    def sleep(self, s: float) -> None:
        self.now += s

    def clock(self) -> float:
        return self.now


def job(thermal_mode: str, timeout_s: float = 600.0, models_dir=None):
    return jobs_for(
        models_dir,
        {"kind": "generate", "prompt_tokens": [16], "gen_tokens": [4], "depth": [0]},
        engines=["llama.cpp"],
        thermal=thermal_mode,
        thermal_timeout_s=timeout_s,
    )[0]


def test_wait_polls_until_the_mac_is_nominal(models_dir):
    mac = Mac(THROTTLED, THROTTLED, NOMINAL)
    rec = thermal.before_job(job("wait", models_dir=models_dir), mac.read, mac.sleep, mac.clock)
    assert rec["start"]["thermal_state"] == "nominal" and not rec["timed_out"]
    assert rec["waited_s"] == 2 * thermal.POLL_S and mac.reads == 3
    done = thermal.after_job(rec, mac.read)
    assert done["throttled"] is False and done["on_battery"] is True and done["end"]["power_source"] == "battery"


def test_wait_is_bounded_and_the_result_is_marked_throttled(models_dir):
    mac = Mac(THROTTLED)
    rec = thermal.before_job(job("wait", timeout_s=12, models_dir=models_dir), mac.read, mac.sleep, mac.clock)
    assert rec["timed_out"] and rec["waited_s"] == 12 and rec["start"]["cpu_speed_limit"] == 28
    assert thermal.after_job(rec, mac.read)["throttled"] is True


def test_record_runs_at_once_and_marks_a_job_that_ended_throttled(models_dir):
    mac = Mac(NOMINAL, THROTTLED)
    rec = thermal.before_job(job("record", models_dir=models_dir), mac.read, mac.sleep, mac.clock)
    assert rec["waited_s"] == 0 and mac.reads == 1
    done = thermal.after_job(rec, mac.read)
    assert (done["start"]["thermal_state"], done["end"]["thermal_state"], done["throttled"]) == (
        "nominal",
        "throttled",
        True,
    )


def test_refuse_fails_the_job_before_anything_runs(models_dir):
    mac = Mac(THROTTLED)
    res = run_in_child(job("refuse", models_dir=models_dir), models_dir, read_thermal=mac.read)
    assert res.status == "failed" and res.error.startswith("thermal: refuse: the host is throttled")
    assert "cpu_speed_limit=28" in res.error and not res.samples and res.environment is None


def test_a_real_job_here_carries_its_thermal_record(models_dir):
    res = run_in_child(job("wait", models_dir=models_dir), models_dir)
    assert res.status == "ok", res.error
    rec = res.extra["thermal"]
    assert rec["mode"] == "wait" and rec["throttled"] is False and rec["timed_out"] is False
    assert {"thermal_state", "power_source"} <= set(rec["start"]) and rec["end"]["thermal_state"] in (
        "nominal",
        "unknown",
    )


def test_a_bad_thermal_mode_names_the_field():
    with pytest.raises(Exception) as err:
        parse_sweep({"name": "t", "models": [SMALL], "thermal": "hot"})
    assert "thermal" in str(err.value)
