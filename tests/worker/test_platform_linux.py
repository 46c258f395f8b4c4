"""siliconbench/worker/platform/linux.py on this Linux host, and the same code pointed at a small sysfs tree for the
thermal and power states this VM does not have (no thermal zones, no power supplies)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pytest

from siliconbench.contract.results import Environment

from siliconbench.worker.platform import Linux, current, report
from siliconbench.worker.platform.darwin import Darwin
from siliconbench.worker.platform.host_facts import host_facts
from siliconbench.worker.platform.threads import performance_cores

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux platform module")

ENV_KEYS = {"hostname", "os", "os_version", "chip", "cores", "memory_bytes", "machine", "python"}


def test_current_is_linux_and_chosen_once():
    assert isinstance(current(), Linux) and current() is current()


def test_host_facts_here():
    facts = host_facts()
    assert set(facts) == ENV_KEYS | {"host_details"}
    assert facts["os"] == "Linux" and facts["cores"] == os.cpu_count()
    assert facts["os_version"].endswith(f"(kernel {platform.release()})")
    cpuinfo = Path("/proc/cpuinfo").read_text()
    assert f"model name\t: {facts['chip']}" in cpuinfo or facts["chip"] in (platform.processor(), platform.machine())
    assert facts["host_details"]["kernel"] == platform.release()


def test_host_facts_still_build_an_environment():
    """results.Environment(**host_facts(), ...) is how every result records its machine."""
    env = Environment(**host_facts())
    assert env.chip == host_facts()["chip"] and env.cores == host_facts()["cores"]


def test_physical_cores_are_the_distinct_thread_sibling_sets():
    masks = set()
    for topo in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology/thread_siblings"):
        masks.add(topo.read_text().strip())
    assert Linux().physical_cores() == (len(masks) or None)
    assert performance_cores() == (len(masks) or os.cpu_count())


def test_thermal_power_here_matches_sysfs():
    tp = current().thermal_power()
    has_zones = any(Path("/sys/class/thermal").glob("thermal_zone*"))
    has_supplies = any(Path("/sys/class/power_supply").glob("*"))
    if not has_zones:
        assert tp["thermal_state"] == "unknown" and tp["thermal_zones"] == []
    if not has_supplies:
        assert tp["power_source"] == "unknown"
    assert tp["low_power_mode"] is None or Path("/sys/firmware/acpi/platform_profile").exists()


def test_report_for_doctor():
    """Flat key=value pairs doctor can print: the common three, the cores, the sysfs figures."""
    r = report()
    assert r["platform"] == "Linux" and r["performance_cores"] == performance_cores()
    assert {"thermal_state", "power_source", "low_power_mode", "thermal_zones", "source"} <= set(r)
    assert all(v is None or isinstance(v, (str, int, float, bool)) for v in r.values())
    assert r["thermal_zones"] == len(current().thermal_zones())


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")


def laptop(root: Path, temp: int, ac_online: str, status: str) -> Linux:
    write(
        root,
        {
            "sys/class/thermal/thermal_zone0/type": "x86_pkg_temp",
            "sys/class/thermal/thermal_zone0/temp": str(temp),
            "sys/class/thermal/thermal_zone0/trip_point_0_type": "active",  # a fan trip: does not limit the CPU
            "sys/class/thermal/thermal_zone0/trip_point_0_temp": "50000",
            "sys/class/thermal/thermal_zone0/trip_point_1_type": "passive",
            "sys/class/thermal/thermal_zone0/trip_point_1_temp": "95000",
            "sys/class/power_supply/AC/type": "Mains",
            "sys/class/power_supply/AC/online": ac_online,
            "sys/class/power_supply/BAT0/type": "Battery",
            "sys/class/power_supply/BAT0/status": status,
            "sys/class/power_supply/BAT0/capacity": "81",
            "sys/firmware/acpi/platform_profile": "low-power",
        },
    )
    return Linux(root)


def test_a_cool_laptop_on_mains(tmp_path):
    tp = laptop(tmp_path, 61000, "1", "Charging").thermal_power()
    assert (tp["thermal_state"], tp["max_temp_c"], tp["power_source"], tp["battery_percent"]) == (
        "nominal",
        61.0,
        "ac",
        81,
    )
    assert tp["thermal_zones"][0]["limit_c"] == 95.0 and tp["low_power_mode"] is True


def test_a_hot_laptop_on_battery(tmp_path):
    tp = laptop(tmp_path, 97000, "0", "Discharging").thermal_power()
    assert (tp["thermal_state"], tp["power_source"]) == ("throttled", "battery")


def test_physical_cores_from_a_topology_tree(tmp_path):
    # two cores with two hyperthreads each: four CPUs, two sibling masks
    write(
        tmp_path,
        {
            f"sys/devices/system/cpu/cpu{n}/topology/thread_siblings": mask
            for n, mask in enumerate(["5", "a", "5", "a"])
        },
    )
    write(tmp_path, {"proc/cpuinfo": "processor\t: 0\nmodel name\t: Test CPU", "etc/os-release": 'PRETTY_NAME="Tree"'})
    linux = Linux(tmp_path)
    assert (linux.physical_cores(), linux.performance_cores(), linux.cpu_model()) == (2, 2, "Test CPU")
    assert linux.host_facts()["os_version"] == f"Tree (kernel {platform.release()})"


def test_kernel_peaks_of_a_real_process_through_the_seam():
    """VmHWM and PSS of a process this test starts, reset through clear_refs (killed by its own PID)."""
    p = subprocess.Popen([sys.executable, "-c", "b = bytearray(64 << 20); input()"], stdin=subprocess.PIPE)
    try:
        linux = Linux()
        time.sleep(0.5)
        peak = linux.peak_rss(p.pid)
        assert peak is not None and peak > 64 << 20
        assert linux.pss(p.pid) > 0 and linux.reset_peak_rss(p.pid)
        assert linux.peak_rss(p.pid) <= peak
    finally:
        p.kill()
        p.wait()
    assert linux.own_peak_rss_bytes() > 0


def test_darwin_answers_the_linux_only_questions_with_none():
    mac = Darwin()
    assert (mac.pss(1), mac.peak_rss(1), mac.reset_peak_rss(1)) == (None, None, False)
