"""Parsers of macOS command outputs (sysctl-style lines, ioreg, system_profiler JSON, pmset): text in, facts
out, nothing run. Tested on outputs recorded on real Macs (tests/data/darwin/SOURCES.md)."""

from __future__ import annotations

import json
import re


def parse_colon_lines(text: str) -> dict[str, str]:
    """``key: value`` lines (sw_vers, sysctl without -n) into a dict, values stripped."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def parse_ioreg(text: str) -> dict[str, object]:
    """The top-level ``"key" = value`` properties of an ioreg node: ints as int, "strings" unquoted,
    anything else (Yes, <data>, {dicts}) as printed."""
    props: dict[str, object] = {}
    for m in re.finditer(r'^\s*\|?\s*"([^"]+)" = (.*)$', text, re.MULTILINE):
        raw = m.group(2).strip()
        if re.fullmatch(r"-?\d+", raw):
            props[m.group(1)] = int(raw)
        elif len(raw) >= 2 and raw[0] == raw[-1] == '"':
            props[m.group(1)] = raw[1:-1]
        else:
            props[m.group(1)] = raw
    return props


def parse_displays(text: str) -> dict:
    """GPU model, core count and Metal entry from ``system_profiler SPDisplaysDataType -json``.

    ``metal_family`` is system_profiler's Metal entry without its prefixes: "metal3" / "metal4" from
    ``spdisplays_mtlgpufamilysupport`` (macOS 13+), "apple7" from the older ``spdisplays_metalfamily``."""
    out = {"gpu_model": None, "gpu_cores": None, "metal_family": None}
    try:
        items = json.loads(text).get("SPDisplaysDataType") or []
    except (ValueError, AttributeError):
        return out
    gpu = next((i for i in items if i.get("sppci_device_type") == "spdisplays_gpu"), items[0] if items else {})
    cores = str(gpu.get("sppci_cores", ""))
    metal = gpu.get("spdisplays_mtlgpufamilysupport") or gpu.get("spdisplays_metalfamily") or ""
    out.update(
        gpu_model=gpu.get("sppci_model"),
        gpu_cores=int(cores) if cores.isdigit() else None,
        metal_family=re.sub(r"^spdisplays_(mtlgpufamily)?", "", metal) or None,
    )
    return out


def parse_pmset_therm(text: str) -> dict:
    """``pmset -g therm`` (or a thermlog block): warning levels and the CPU power figures.

    Apple silicon prints only "Note: No ... has been recorded" lines when nothing limits it; a speed or
    scheduler limit under 100, or a recorded warning level above 0, is throttling."""
    out: dict = {
        "thermal_state": "unknown",
        "thermal_warning_level": None,
        "performance_warning_level": None,
        "cpu_speed_limit": None,
        "cpu_scheduler_limit": None,
        "cpu_available_cpus": None,
    }
    for kind in ("thermal", "performance"):
        if re.search(rf"No {kind} warning level has been recorded", text, re.IGNORECASE):
            out[f"{kind}_warning_level"] = 0
        elif m := re.search(rf"{kind} warning level\D*(\d+)", text, re.IGNORECASE):
            out[f"{kind}_warning_level"] = int(m.group(1))
    for key, field in (
        ("CPU_Speed_Limit", "cpu_speed_limit"),
        ("CPU_Scheduler_Limit", "cpu_scheduler_limit"),
        ("CPU_Available_CPUs", "cpu_available_cpus"),
    ):
        if values := re.findall(rf"{key}\s*=\s*(\d+)", text):
            out[field] = int(values[-1])  # a thermlog has many blocks: the last is the current one
    levels = [out[k] for k in ("thermal_warning_level", "performance_warning_level") if out[k] is not None]
    limits = [out[k] for k in ("cpu_speed_limit", "cpu_scheduler_limit") if out[k] is not None]
    if any(v > 0 for v in levels) or any(v < 100 for v in limits):
        out["thermal_state"] = "throttled"
    elif levels or limits:
        out["thermal_state"] = "nominal"
    return out


def parse_pmset_batt(text: str) -> dict:
    """``pmset -g batt``: the power source and, where there is a battery, its charge and state."""
    m = re.search(r"Now drawing from '([^']+)'", text)
    source = (
        {"AC Power": "ac", "Battery Power": "battery", "UPS Power": "ups"}.get(m.group(1), "unknown")
        if m
        else "unknown"
    )
    batt = re.search(r"InternalBattery-\d+.*?(\d+)%;\s*([^;]+);", text)
    return {
        "power_source": source,
        "battery_percent": int(batt.group(1)) if batt else None,
        "battery_state": batt.group(2).strip() if batt else None,
    }


def parse_low_power_mode(text: str) -> bool | None:
    """Low Power Mode from ``pmset -g``: ``lowpowermode 1``, or on newer macOS ``powermode 1``
    (0 automatic, 1 low power, 2 high power); None where the Mac has no such setting."""
    m = re.search(r"^\s*(?:low)?powermode\s+(\d+)", text, re.MULTILINE)
    return None if m is None else m.group(1) == "1"
