"""Linux behind the platform seam: host facts from /proc and /etc, physical cores from sysfs topology,
thermal state from /sys/class/thermal and power from /sys/class/power_supply.

Every path is read under ``root`` ("/" on a real host), so tests can point the same code at a tree.
"""

from __future__ import annotations

import os
import platform
import resource
import socket
from functools import lru_cache
from pathlib import Path

import psutil

from siliconbench.worker.platform.nvidia import gpu_facts

# Trip types at which the kernel starts limiting the CPU ("active" trips only start fans).
LIMITING_TRIPS = ("passive", "hot", "critical")


@lru_cache(maxsize=1)
def _gpu() -> dict | None:
    return gpu_facts()


def gpu_details() -> dict:
    """{"gpu": NVML's facts} on a CUDA host (nvidia-ml-py and a driver), else nothing: CPU hosts keep the
    identity they had."""
    gpu = _gpu()
    return {"gpu": gpu} if gpu else {}


class Linux:
    name = "Linux"

    def __init__(self, root: str | Path = "/"):
        self.root = Path(root)

    can_evict = hasattr(os, "posix_fadvise")

    def evict_file(self, path) -> None:
        """Drop a file's unmapped pages from the page cache: written back first (DONTNEED skips dirty
        pages, e.g. of a model made seconds ago), then posix_fadvise(POSIX_FADV_DONTNEED)."""
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def memory_pressure_pct(self) -> float | None:
        """PSI: the share of the last 10 s in which some task waited for memory (/proc/pressure/memory, some
        avg10); None where the kernel has no PSI."""
        text = self._read("proc/pressure/memory") or ""
        for line in text.splitlines():
            if line.startswith("some "):
                fields = dict(f.split("=", 1) for f in line.split()[1:])
                return float(fields.get("avg10", 0.0))
        return None

    def own_peak_rss_bytes(self) -> int:
        """This process's peak RSS: VmHWM, the high-water mark of its own address space.

        Not getrusage's ru_maxrss: at exec Linux folds the address space being replaced (the parent's copy
        after fork, the parent's own under vfork) into the process's maxrss (fs/exec.c exec_mmap,
        setmax_mm_hiwater_rss), so a child started by a 1 GiB parent reports at least 1 GiB there. The mm made
        at exec starts its VmHWM at zero."""
        own = self.peak_rss(os.getpid())
        return own if own is not None else int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024

    def reset_peak_rss(self, pid: int) -> bool:
        """Reset a process's VmHWM (Linux >= 4.0: write 5 to clear_refs); False where that is refused."""
        try:
            (self.root / f"proc/{pid}/clear_refs").write_text("5")
        except OSError:
            return False
        return True

    def peak_rss(self, pid: int) -> int | None:
        """A process's VmHWM (peak RSS since start or the last reset), in bytes; None if it cannot be read."""
        status = self._read(f"proc/{pid}/status")
        for line in (status or "").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return None

    def pss(self, pid: int) -> int | None:
        """Proportional set size: shared pages split between the processes that map them."""
        try:
            return int(psutil.Process(pid).memory_full_info().pss)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None

    def phys_footprint(self, pid: int) -> int | None:
        """Darwin's accounting only: Linux has RSS, VmHWM and PSS instead (siliconbench/worker/measure/memory.py)."""
        return None

    def lifetime_max_phys_footprint(self, pid: int) -> int | None:
        return None

    def _read(self, rel: str | Path) -> str | None:
        try:
            return (self.root / rel).read_text().strip()
        except OSError:
            return None

    def physical_cores(self) -> int | None:
        """Distinct ``thread_siblings`` sets: llama.cpp's cpu_get_num_physical_cores() on Linux."""
        siblings = set()
        cpu = 0
        while (mask := self._read(f"sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings")) is not None:
            siblings.add(mask)
            cpu += 1
        return len(siblings) or None

    def performance_cores(self) -> int:
        """llama-bench's default ``-t``: the physical cores (no performance/efficiency split is read here)."""
        return self.physical_cores() or os.cpu_count() or 1

    def cpu_model(self) -> str:
        for line in (self._read("proc/cpuinfo") or "").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
        return platform.processor() or platform.machine()

    def distribution(self) -> str:
        for line in (self._read("etc/os-release") or "").splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
        return ""

    def host_facts(self) -> dict:
        distribution = self.distribution()
        return {
            "hostname": socket.gethostname(),
            "os": self.name,
            "os_version": f"{distribution} (kernel {platform.release()})".strip(),
            "chip": self.cpu_model(),
            "cores": os.cpu_count() or 1,
            "memory_bytes": int(psutil.virtual_memory().total),
            "machine": platform.machine(),
            "python": platform.python_version(),
            "host_details": {
                "physical_cores": self.physical_cores(),
                "kernel": platform.release(),
                "distribution": distribution or None,
                **gpu_details(),
            },
        }

    def thermal_zones(self) -> list[dict]:
        """Each /sys/class/thermal zone: its type, temperature and lowest CPU-limiting trip point (deg C)."""
        zones = []
        for zone in sorted((self.root / "sys/class/thermal").glob("thermal_zone*")):
            temp = self._read(zone / "temp")
            if temp is None or not temp.lstrip("-").isdigit():
                continue
            trips = []
            for kind in sorted(zone.glob("trip_point_*_type")):
                limit = self._read(kind.with_name(kind.name.replace("_type", "_temp")))
                if self._read(kind) in LIMITING_TRIPS and limit and limit.lstrip("-").isdigit():
                    trips.append(int(limit) / 1000)
            zones.append(
                {
                    "zone": zone.name,
                    "type": self._read(zone / "type"),
                    "temp_c": int(temp) / 1000,
                    "limit_c": min(trips) if trips else None,
                }
            )
        return zones

    def power_supplies(self) -> list[dict]:
        supplies = []
        for supply in sorted((self.root / "sys/class/power_supply").glob("*")):
            supplies.append(
                {
                    "name": supply.name,
                    "type": self._read(supply / "type"),
                    "online": self._read(supply / "online"),
                    "status": self._read(supply / "status"),
                    "capacity": self._read(supply / "capacity"),
                }
            )
        return supplies

    def thermal_power(self) -> dict:
        zones = self.thermal_zones()
        judged = [z for z in zones if z["limit_c"] is not None]
        if any(z["temp_c"] >= z["limit_c"] for z in judged):
            thermal = "throttled"
        else:
            thermal = "nominal" if judged else "unknown"  # no zone with a limiting trip: nothing to judge by
        supplies = self.power_supplies()
        mains = [s for s in supplies if s["type"] in ("Mains", "USB")]
        batteries = [s for s in supplies if s["type"] == "Battery"]
        if any(s["online"] == "1" for s in mains):
            source = "ac"
        elif any(s["status"] == "Discharging" for s in batteries) or (mains and batteries):
            source = "battery"
        else:
            source = "unknown"  # no supply class: a server or a VM, which says nothing about its power
        profile = self._read("sys/firmware/acpi/platform_profile")
        capacity = next((s["capacity"] for s in batteries if (s["capacity"] or "").isdigit()), None)
        return {
            "thermal_state": thermal,
            "max_temp_c": max((z["temp_c"] for z in zones), default=None),
            "thermal_zones": zones,
            "power_source": source,
            "battery_percent": int(capacity) if capacity else None,
            "low_power_mode": None if profile is None else profile == "low-power",
            "platform_profile": profile,
            "source": "sysfs",
        }
