"""siliconbench/worker/platform/darwin.py's code paths on Linux, fed outputs recorded on real Macs
(tests/data/darwin/SOURCES.md says which Mac printed each), and its rusage_info_v4 ctypes layout
checked field by field against the macOS SDK header text stored beside them."""

from __future__ import annotations

import ctypes
import json
import os
import re
import struct

import pytest

from siliconbench.contract.spec import parse_sweep

import siliconbench.worker.platform
from siliconbench.coordinator.fleet.placement import HostView, select_hosts
from siliconbench.worker.platform.darwin import (
    RUSAGE_INFO_V4,
    Commands,
    Darwin,
    RusageInfoV4,
    _libc_calls,
    parse_displays,
    parse_ioreg,
    parse_low_power_mode,
    parse_pmset_batt,
    parse_pmset_therm,
)
from tests.worker.darwin_outputs import Recorded, recorded

DISPLAYS = ("system_profiler", "SPDisplaysDataType", "-json")
IOREG = ("ioreg", "-rc", "AGXAccelerator", "-d", "1")


def test_host_facts_of_an_m4_max(monkeypatch):
    """The whole host_facts path. The sysctl lines are the M4 Max's; sw_vers, ioreg and system_profiler
    were recorded on other Macs (no Apple-silicon sw_vers or complete ioreg node was found), so each
    assertion below names the file it comes from. Python itself is taken to be a native arm64 one."""
    monkeypatch.setattr("platform.machine", lambda: "arm64")
    mac = Darwin(
        Recorded(
            sysctl=("sysctl_m4_max_archspec.txt",),
            outputs={
                ("sw_vers",): "sw_vers_catalina_rbenv1451.txt",
                IOREG: "ioreg_agx_m1pro_stats1094_head.txt",
                DISPLAYS: "system_profiler_displays_m1_torchserve.json",
            },
        )
    )
    facts = mac.host_facts()
    # sysctl_m4_max_archspec.txt
    assert (facts["chip"], facts["cores"], facts["memory_bytes"]) == ("Apple M4 Max", 16, 68719476736)
    details = facts["host_details"]
    assert (details["performance_cores"], details["efficiency_cores"]) == (12, 4)
    assert details["unified_memory_bytes"] == 68719476736
    # oids the recorded file lacks read as None, never as a guess
    assert (details["model"], details["wired_limit_mb"]) == (None, None)
    # no proc_translated line, but hw.optional.arm64 = 1 and an arm64 Python: native
    assert (facts["machine"], details["translated"]) == ("arm64", False)
    # sw_vers_catalina_rbenv1451.txt
    assert facts["os_version"] == "macOS 10.15.5 (19F101)"
    assert (details["macos_version"], details["macos_build"]) == ("10.15.5", "19F101")
    # the ioreg head has no gpu-core-count: system_profiler's sppci_cores (M1, 7-core GPU) fills in
    assert (details["gpu_model"], details["gpu_cores"], details["metal_family"]) == ("Apple M1", 7, "apple7")
    assert facts["os"] == "Darwin" and set(facts) >= {"hostname", "machine", "python"}


@pytest.mark.parametrize(
    "sysctl, p_cores, e_cores",
    [
        ("sysctl_m4_max_archspec.txt", 12, 4),
        ("sysctl_m1pro_cpufetch139.txt", 8, 2),
        ("sysctl_m1_rosetta_archspec.txt", 4, 4),  # perflevels still describe the M1 under Rosetta
    ],
)
def test_performance_and_efficiency_cores(sysctl, p_cores, e_cores):
    mac = Darwin(Recorded(sysctl=(sysctl,)))
    assert (mac.performance_cores(), mac.efficiency_cores()) == (p_cores, e_cores)


def test_intel_mac_without_perflevels_falls_back():
    """An Intel Mac has no hw.perflevel*: hw.physicalcpu, else os.cpu_count(), is what llama.cpp uses."""
    mac = Darwin(Recorded(sysctl=("sysctl_intel_skylake_archspec.txt",)))
    assert mac.sysctl("machdep.cpu.brand_string") == "Intel(R) Core(TM) i7-6700K CPU @ 4.00GHz"
    assert mac.efficiency_cores() is None
    # the fallback is this host's count: the recorded file has no hw.physicalcpu
    assert mac.performance_cores() == (os.cpu_count() or 1)
    assert ("sysctl", "-n", "hw.physicalcpu") in mac.commands.calls


def test_rosetta_flag():
    native = Darwin(Recorded(sysctl=("sysctl_proc_translated_native_brew9252.txt",)))
    rosetta = Darwin(Recorded(sysctl=("sysctl_proc_translated_rosetta_brew9252.txt", "sysctl_m1_rosetta_archspec.txt")))
    intel = Darwin(Recorded(sysctl=("sysctl_intel_skylake_archspec.txt",)))
    assert (native.translated(), rosetta.translated(), intel.translated()) == (False, True, None)
    # under Rosetta the chip is still the M1 and hw.cputype is x86's 7: the flag is what tells them apart
    assert (rosetta.sysctl("machdep.cpu.brand_string"), rosetta.sysctl_int("hw.cputype")) == ("Apple M1", 7)
    assert rosetta.host_facts()["host_details"]["translated"] is True


def test_an_x86_64_python_on_apple_silicon_is_translated(monkeypatch):
    """The Rosetta-side sysctl lines carry hw.optional.arm64 = 1; with no proc_translated answer, the
    Python's own architecture decides."""
    mac = Darwin(Recorded(sysctl=("sysctl_m1_rosetta_archspec.txt",)))
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    assert mac.translated() is True
    monkeypatch.setattr("platform.machine", lambda: "arm64")
    assert mac.translated() is False


def test_ioreg_properties_of_an_m1_pro():
    props = parse_ioreg(recorded("ioreg_agx_m1pro_stats1094_head.txt"))
    assert props["IONameMatched"] == "gpu,t6000"
    assert props["AGXParameterBufferMaxSizeEverMemless"] == 574881792
    assert props["IOMatchedAtBoot"] == "Yes"
    assert props["SCMVersionNumber"] == ""
    assert props["PerformanceStatistics"].startswith('{"TiledSceneBytes"=1572864')
    assert "gpu-core-count" not in props  # the public copy stops before it


def test_displays_json_of_an_m1():
    gpu = parse_displays(recorded("system_profiler_displays_m1_torchserve.json"))
    assert gpu == {"gpu_model": "Apple M1", "gpu_cores": 7, "metal_family": "apple7"}
    assert parse_displays("") == {"gpu_model": None, "gpu_cores": None, "metal_family": None}


@pytest.mark.parametrize(
    "name, state, thermal, speed, scheduler, cpus",
    [
        ("pmset_therm_m1pro_stats749.txt", "nominal", 0, None, None, None),
        ("pmset_therm_cpu_power_node_exporter2031.txt", "nominal", 0, 100, 100, 12),
        ("pmset_thermlog_throttled_menumeters158.txt", "throttled", None, 28, 40, 8),
    ],
)
def test_pmset_therm(name, state, thermal, speed, scheduler, cpus):
    t = parse_pmset_therm(recorded(name))
    assert (
        t["thermal_state"],
        t["thermal_warning_level"],
        t["cpu_speed_limit"],
        t["cpu_scheduler_limit"],
        t["cpu_available_cpus"],
    ) == (state, thermal, speed, scheduler, cpus)


def test_pmset_therm_without_output_is_unknown():
    assert parse_pmset_therm("")["thermal_state"] == "unknown"


@pytest.mark.parametrize(
    "name, source, percent, state",
    [
        ("pmset_batt_ac_charging_powerlevel9k376.txt", "ac", 43, "charging"),
        ("pmset_batt_ac_not_charging_battstat2.txt", "ac", 88, "AC attached"),
        ("pmset_batt_battery_spaceship640.txt", "battery", 95, "discharging"),
        ("pmset_batt_desktop_liquidprompt317.txt", "ac", None, None),
        ("pmset_batt_head1_arm64_nixdarwin1850.txt", "battery", None, None),
    ],
)
def test_pmset_batt(name, source, percent, state):
    assert parse_pmset_batt(recorded(name)) == {
        "power_source": source,
        "battery_percent": percent,
        "battery_state": state,
    }


def test_low_power_mode():
    assert parse_low_power_mode(recorded("pmset_g_arm64_aldente603.txt")) is False
    assert parse_low_power_mode(recorded("pmset_g_custom_m1max_alfred6_head.txt")) is False  # "powermode 0"
    assert parse_low_power_mode("") is None


def test_thermal_power_reads_the_three_pmset_views():
    mac = Darwin(
        Recorded(
            outputs={
                ("pmset", "-g", "therm"): "pmset_thermlog_throttled_menumeters158.txt",
                ("pmset", "-g", "batt"): "pmset_batt_battery_spaceship640.txt",
                ("pmset", "-g"): "pmset_g_arm64_aldente603.txt",
            }
        )
    )
    tp = mac.thermal_power()
    assert (tp["thermal_state"], tp["power_source"], tp["battery_percent"], tp["low_power_mode"]) == (
        "throttled",
        "battery",
        95,
        False,
    )


def test_report_on_a_mac(monkeypatch):
    """siliconbench.worker.platform.report(), what doctor prints, with the Darwin module behind the seam."""
    mac = Darwin(
        Recorded(
            sysctl=("sysctl_m1pro_cpufetch139.txt",),
            outputs={
                ("pmset", "-g", "therm"): "pmset_therm_m1pro_stats749.txt",
                ("pmset", "-g", "batt"): "pmset_batt_head1_arm64_nixdarwin1850.txt",
                ("pmset", "-g"): "pmset_g_custom_m1max_alfred6_head.txt",
            },
        )
    )
    monkeypatch.setattr(siliconbench.worker.platform, "current", lambda: mac)
    r = siliconbench.worker.platform.report()
    assert (r["platform"], r["performance_cores"], r["thermal_state"], r["power_source"], r["low_power_mode"]) == (
        "Darwin",
        8,
        "nominal",
        "battery",
        False,
    )
    assert r["source"] == "pmset" and r["performance_warning_level"] == 0


# --- struct rusage_info_v4 against the SDK header -------------------------------------------------------

C_TYPES = {"uint8_t": ctypes.c_uint8, "uint64_t": ctypes.c_uint64}


def header_fields() -> list[tuple[str, str, int]]:
    """(name, C type, array length) of struct rusage_info_v4, in order, from the stored header text."""
    text = recorded("resource_h_rusage_info_v4.h")
    body = re.search(r"struct rusage_info_v4 \{(.*?)\};", text, re.DOTALL).group(1)
    return [(name, ctype, int(n or 1)) for ctype, name, n in re.findall(r"(\w+)\s+(\w+)(?:\[(\d+)\])?;", body)]


def header_layout() -> tuple[dict[str, int], int]:
    """Offsets and size by the C rules (each field at its natural alignment), from the header alone."""
    offsets, at, align = {}, 0, 1
    for name, ctype, n in header_fields():
        size = ctypes.sizeof(C_TYPES[ctype])
        at = (at + size - 1) // size * size
        offsets[name], at, align = at, at + size * n, max(align, size)
    return offsets, (at + align - 1) // align * align


def test_rusage_info_v4_matches_the_header_field_by_field():
    fields = header_fields()
    assert len(fields) == 36 and fields[0] == ("ri_uuid", "uint8_t", 16)
    ours = RusageInfoV4._fields_
    assert [name for name, _ in ours] == [name for name, _, _ in fields]
    offsets, size = header_layout()
    for (name, ctype, n), (_our_name, our_type) in zip(fields, ours, strict=False):
        if n > 1:
            assert (our_type._type_, our_type._length_) == (C_TYPES[ctype], n), name
        else:
            assert our_type == C_TYPES[ctype], name
        assert getattr(RusageInfoV4, name).offset == offsets[name], name
        assert getattr(RusageInfoV4, name).size == ctypes.sizeof(C_TYPES[ctype]) * n, name
    assert ctypes.sizeof(RusageInfoV4) == size == 296
    assert RusageInfoV4.ri_phys_footprint.offset == offsets["ri_phys_footprint"] == 72
    assert RusageInfoV4.ri_lifetime_max_phys_footprint.offset == offsets["ri_lifetime_max_phys_footprint"] == 240


def test_rusage_flavor_matches_the_header():
    text = recorded("resource_h_rusage_info_v4.h")
    assert int(re.search(r"#define RUSAGE_INFO_V4\s+(\d+)", text).group(1)) == RUSAGE_INFO_V4


def test_phys_footprint_reads_the_kernels_bytes():
    """A stand-in for the kernel writes a rusage_info_v4 image laid out from the header alone (not from
    our ctypes class) into the buffer proc_pid_rusage is given; the readers must find the right fields."""
    offsets, size = header_layout()
    image = bytearray(size)
    struct.pack_into("<Q", image, offsets["ri_phys_footprint"], 1_234_567_890)
    struct.pack_into("<Q", image, offsets["ri_lifetime_max_phys_footprint"], 9_876_543_210)
    struct.pack_into("<Q", image, offsets["ri_resident_size"], 555)

    def kernel(pid, flavor, info):
        assert flavor == RUSAGE_INFO_V4 and ctypes.sizeof(info) == size
        ctypes.memmove(ctypes.addressof(info), bytes(image), size)
        return 0

    mac = Darwin(Recorded(rusage=kernel))
    assert mac.phys_footprint(4242) == 1_234_567_890
    assert mac.lifetime_max_phys_footprint(4242) == 9_876_543_210
    assert mac.rusage(4242).ri_resident_size == 555
    assert ("proc_pid_rusage", 4242, RUSAGE_INFO_V4) in mac.commands.calls


def test_phys_footprint_of_a_process_that_is_gone():
    mac = Darwin(Recorded(rusage=lambda pid, flavor, info: -1))  # ESRCH: no such process
    assert mac.phys_footprint(1) is None and mac.lifetime_max_phys_footprint(1) is None


def test_the_real_runner_returns_stdout_or_nothing():
    """Commands.run itself (what a Mac uses), on commands this Linux host has."""
    runner = Commands()
    assert runner.run(["echo", "hw.ncpu: 16"]) == "hw.ncpu: 16\n"
    assert runner.run(["false"]) == ""
    assert runner.run(["/nonexistent/sysctl", "-n", "hw.model"]) == ""


class RecordingLibc:
    """This machine's real libc (mmap, msync and munmap behave alike on Linux), with every call recorded."""

    def __init__(self):
        self.real = _libc_calls(ctypes.CDLL(None, use_errno=True))
        self.calls: list[tuple] = []

    def __getattr__(self, name):
        fn = getattr(self.real, name)

        def call(*args):
            self.calls.append((name, *args))
            return fn(*args)

        return call


def test_eviction_maps_the_whole_file_shared_and_invalidates_it(tmp_path):
    f = tmp_path / "weights.bin"
    f.write_bytes(os.urandom(3 * 4096 + 17))
    libc = RecordingLibc()

    class WithLibc(Recorded):
        def libc(self):
            return libc

    mac = Darwin(WithLibc())
    assert mac.can_evict
    mac.evict_file(f)
    (mmap_call, msync_call, munmap_call) = libc.calls
    size = 3 * 4096 + 17
    # mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0); msync(addr, size, MS_INVALIDATE); munmap(addr, size)
    assert mmap_call[0] == "mmap" and mmap_call[1] is None and mmap_call[2:5] == (size, 0x01, 0x0001)
    assert mmap_call[6] == 0
    assert msync_call == ("msync", msync_call[1], size, 0x0002) and msync_call[1]
    assert munmap_call == ("munmap", msync_call[1], size)
    assert f.stat().st_size == size  # the file itself is untouched


def test_a_mac_minis_model_and_gpu_cores_choose_it_in_a_sweep():
    """hosts: {model, gpu_cores} against host facts read from recorded outputs: hw.model from the M2 Pro
    Mac mini's validation log, GPU cores from the M1's system_profiler (7)."""
    mac = Darwin(
        Recorded(
            sysctl=("sysctl_m1pro_cpufetch139.txt", "sysctl_m2pro_mac_mini_validation_log.txt"),
            outputs={DISPLAYS: "system_profiler_displays_m1_torchserve.json"},
        )
    )
    details = mac.host_facts()["host_details"]
    assert (details["model"], details["wired_limit_mb"], details["gpu_cores"]) == ("Mac14,12", 0, 7)
    mini = HostView(name="mini", details=details)
    other = HostView(name="other", details={**details, "model": "Mac16,11", "gpu_cores": 20})

    def chosen(hosts):
        return [
            h.name for h in select_hosts(parse_sweep({"name": "s", "models": ["m"], "hosts": hosts}), [mini, other])
        ]

    assert chosen({"model": "mac14,12"}) == ["mini"]
    assert chosen({"gpu_cores": 20}) == ["other"]
    assert chosen({"model": "Mac14,12", "gpu_cores": 20}) == []


def test_gpu_facts_are_read_once_per_boot(tmp_path):
    cache = tmp_path / "gpu_facts.json"
    first = Recorded(outputs={DISPLAYS: "system_profiler_displays_m1_torchserve.json"})
    assert Darwin(first, gpu_cache=cache).gpu()["gpu_cores"] == 7 and DISPLAYS in first.calls
    again = Recorded()  # would answer nothing: the cache must
    assert Darwin(again, gpu_cache=cache).gpu()["gpu_cores"] == 7 and again.calls == []
    cache.write_text(json.dumps({**json.loads(cache.read_text()), "boot": 0.0}))  # recorded at another boot
    assert Darwin(Recorded(), gpu_cache=cache).gpu()["gpu_cores"] is None


class PressureLevel(Recorded):
    """``sysctl -n kern.memorystatus_vm_pressure_level`` answering one of the values XNU defines for it
    (bsd/sys/event.h: NOTE_MEMORYSTATUS_PRESSURE_NORMAL 0x1, _WARN 0x2, _CRITICAL 0x4). Not a recorded output:
    no public recording of this oid was found; the README says so."""

    def __init__(self, level: str):
        super().__init__()
        self.values["kern.memorystatus_vm_pressure_level"] = level


@pytest.mark.parametrize("level, pct", [("1", 0.0), ("2", 50.0), ("4", 100.0), ("3", None)])
def test_memory_pressure_level(level, pct):
    assert Darwin(PressureLevel(level)).memory_pressure_pct() == pct


def test_memory_pressure_unknown_on_a_recorded_mac_without_the_oid():
    """The recorded M4 Max sysctl lines lack the oid: sysctl prints nothing, the gate reads no pressure."""
    assert Darwin(Recorded(sysctl=("sysctl_m4_max_archspec.txt",))).memory_pressure_pct() is None
