"""macOS behind the platform seam: host facts, P/E and GPU cores, thermal state, power, phys_footprint,
page-cache eviction.

Every command output and C structure is read through one ``Commands`` object, so the tests replace
it with outputs recorded on real Macs (tests/data/darwin/SOURCES.md) and run these parsers on Linux.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import re
import resource
import socket
import subprocess
from functools import lru_cache

import psutil

from siliconbench.worker.platform.darwin_outputs import (
    parse_colon_lines,
    parse_displays,
    parse_ioreg,
    parse_low_power_mode,
    parse_pmset_batt,
    parse_pmset_therm,
)

RUSAGE_INFO_V4 = 4  # <sys/resource.h>: the proc_pid_rusage() flavor that carries the footprint peaks
# <sys/mman.h> of the macOS SDK (Linux numbers MS_SYNC 4, so these are Darwin's own)
PROT_READ, MAP_SHARED, MS_INVALIDATE = 0x01, 0x0001, 0x0002
LIBSYSTEM = "/usr/lib/libSystem.B.dylib"  # libproc's proc_pid_rusage is exported from libSystem


class RusageInfoV4(ctypes.Structure):
    """``struct rusage_info_v4`` of the macOS SDK's <sys/resource.h>, field for field (byte counts, ns)."""

    _fields_ = [("ri_uuid", ctypes.c_uint8 * 16)] + [
        (name, ctypes.c_uint64)
        for name in (
            "ri_user_time",
            "ri_system_time",
            "ri_pkg_idle_wkups",
            "ri_interrupt_wkups",
            "ri_pageins",
            "ri_wired_size",
            "ri_resident_size",
            "ri_phys_footprint",
            "ri_proc_start_abstime",
            "ri_proc_exit_abstime",
            "ri_child_user_time",
            "ri_child_system_time",
            "ri_child_pkg_idle_wkups",
            "ri_child_interrupt_wkups",
            "ri_child_pageins",
            "ri_child_elapsed_abstime",
            "ri_diskio_bytesread",
            "ri_diskio_byteswritten",
            "ri_cpu_time_qos_default",
            "ri_cpu_time_qos_maintenance",
            "ri_cpu_time_qos_background",
            "ri_cpu_time_qos_utility",
            "ri_cpu_time_qos_legacy",
            "ri_cpu_time_qos_user_initiated",
            "ri_cpu_time_qos_user_interactive",
            "ri_billed_system_time",
            "ri_serviced_system_time",
            "ri_logical_writes",
            "ri_lifetime_max_phys_footprint",
            "ri_instructions",
            "ri_cycles",
            "ri_billed_energy",
            "ri_serviced_energy",
            "ri_interval_max_phys_footprint",
            "ri_runnable_time",
        )
    ]


@lru_cache(maxsize=1)
def _libsystem() -> ctypes.CDLL:
    lib = ctypes.CDLL(LIBSYSTEM, use_errno=True)
    lib.proc_pid_rusage.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    lib.proc_pid_rusage.restype = ctypes.c_int
    return lib


def _libc_calls(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.mmap.restype = ctypes.c_void_p
    lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64]
    lib.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return lib


class Commands:
    """The one door to macOS: a command's stdout as text, and proc_pid_rusage into a struct."""

    timeout_s = 20.0  # system_profiler takes a few seconds on a cold start

    def run(self, argv: list[str]) -> str:
        """stdout of ``argv``; '' when the tool is missing, fails or times out (sysctl prints an unknown
        oid only on stderr, so an absent key reads as '')."""
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_s)
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout if done.returncode == 0 else ""

    def proc_pid_rusage(self, pid: int, flavor: int, info: ctypes.Structure) -> int:
        """libproc's ``proc_pid_rusage(pid, flavor, &info)``: 0 on success, -1 with errno set."""
        return _libsystem().proc_pid_rusage(pid, flavor, ctypes.byref(info))

    def libc(self) -> ctypes.CDLL:
        """libSystem's mmap / msync / munmap (their argument types set)."""
        return _libc_calls(_libsystem())


class Darwin:
    """A Mac, read through ``commands`` (replace it to replay recorded outputs)."""

    name = "Darwin"

    def __init__(self, commands: Commands | None = None, gpu_cache=None):
        self.commands = commands or Commands()
        # ioreg + system_profiler take about a second: the GPU facts are read once per boot, not per job
        self.gpu_cache = gpu_cache

    def sysctl(self, name: str) -> str:
        return self.commands.run(["sysctl", "-n", name]).strip()

    def sysctl_int(self, name: str) -> int | None:
        value = self.sysctl(name)
        return int(value) if re.fullmatch(r"-?\d+", value) else None

    def performance_cores(self) -> int:
        """llama-bench's default ``-t``: common_cpu_get_num_physical_cores() reads hw.perflevel0.physicalcpu
        (the performance cores), falling back to hw.physicalcpu (Intel Macs have one perflevel)."""
        return self.sysctl_int("hw.perflevel0.physicalcpu") or self.sysctl_int("hw.physicalcpu") or os.cpu_count() or 1

    def efficiency_cores(self) -> int | None:
        """hw.perflevel1.physicalcpu; None on a Mac with one core kind (Intel)."""
        return self.sysctl_int("hw.perflevel1.physicalcpu")

    def translated(self) -> bool | None:
        """True when this Python runs under Rosetta 2; None on a Mac where nothing translates (Intel).

        sysctl.proc_translated describes the sysctl child, which inherits our architecture; an x86_64
        Python on a Mac with hw.optional.arm64 is translated whatever the child says (nothing else runs it)."""
        value = self.sysctl("sysctl.proc_translated")
        if value == "1":
            return True
        if self.sysctl("hw.optional.arm64") == "1":
            return platform.machine() == "x86_64"
        return False if value == "0" else None

    def gpu(self) -> dict:
        """GPU model, cores and Metal entry. The core count comes from the IO registry (what binned chips
        differ in), else from system_profiler's sppci_cores. Kept in ``gpu_cache`` (a file) until the next boot."""
        boot = psutil.boot_time()
        if self.gpu_cache is not None:
            try:
                cached = json.loads(self.gpu_cache.read_text())
                if cached.pop("boot") == boot:
                    return cached
            except (OSError, ValueError, KeyError):
                pass
        facts = self._read_gpu()
        if self.gpu_cache is not None:
            self.gpu_cache.parent.mkdir(parents=True, exist_ok=True)
            self.gpu_cache.write_text(json.dumps({**facts, "boot": boot}))
        return facts

    def _read_gpu(self) -> dict:
        registry = parse_ioreg(self.commands.run(["ioreg", "-rc", "AGXAccelerator", "-d", "1"]))
        shown = parse_displays(self.commands.run(["system_profiler", "SPDisplaysDataType", "-json"]))
        cores = registry.get("gpu-core-count")
        model = registry.get("model")
        return {
            "gpu_model": model if isinstance(model, str) else shown["gpu_model"],
            "gpu_cores": cores if isinstance(cores, int) else shown["gpu_cores"],
            "metal_family": shown["metal_family"],
        }

    def host_facts(self) -> dict:
        vers = parse_colon_lines(self.commands.run(["sw_vers"]))
        version = vers.get("ProductVersion") or platform.mac_ver()[0]
        build = vers.get("BuildVersion") or self.sysctl("kern.osversion")
        chip = self.sysctl("machdep.cpu.brand_string") or platform.processor()
        memory = self.sysctl_int("hw.memsize")
        details = {
            "model": self.sysctl("hw.model") or None,
            "chip": chip,
            "performance_cores": self.performance_cores(),
            "efficiency_cores": self.efficiency_cores(),
            **self.gpu(),
            "unified_memory_bytes": memory,
            # 0 means the OS default limit; None where the oid is absent (older macOS, Intel)
            "wired_limit_mb": self.sysctl_int("iogpu.wired_limit_mb"),
            "macos_version": version,
            "macos_build": build or None,
            "translated": self.translated(),
        }
        return {
            "hostname": socket.gethostname(),
            "os": self.name,
            "os_version": f"macOS {version} ({build})",
            "chip": chip,
            "cores": self.sysctl_int("hw.ncpu") or os.cpu_count() or 1,
            "memory_bytes": memory or int(psutil.virtual_memory().total),
            "machine": platform.machine(),
            "python": platform.python_version(),
            "host_details": details,
        }

    def thermal_power(self) -> dict:
        return {
            **parse_pmset_therm(self.commands.run(["pmset", "-g", "therm"])),
            **parse_pmset_batt(self.commands.run(["pmset", "-g", "batt"])),
            "low_power_mode": parse_low_power_mode(self.commands.run(["pmset", "-g"])),
            "source": "pmset",
        }

    can_evict = True

    def evict_file(self, path) -> None:
        """Drop a file's clean pages from the unified buffer cache without privileges: a shared read-only
        mapping of the whole file, msync(MS_INVALIDATE), unmap (what vmtouch -e and fio's Darwin engine do;
        posix_fadvise does not exist on macOS). Pages another process maps stay; the swap workload measures."""
        size = os.path.getsize(path)
        if size == 0:
            return
        libc = self.commands.libc()
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages are written back first: only clean ones can be invalidated
            addr = libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
            if addr in (None, ctypes.c_void_p(-1).value):
                raise OSError(ctypes.get_errno(), f"mmap of {path} failed")
            try:
                if libc.msync(addr, size, MS_INVALIDATE) != 0:
                    raise OSError(ctypes.get_errno(), f"msync(MS_INVALIDATE) of {path} failed")
            finally:
                libc.munmap(addr, size)
        finally:
            os.close(fd)

    def memory_pressure_pct(self) -> float | None:
        """The kernel's memory-pressure level (kern.memorystatus_vm_pressure_level: 1 normal, 2 warning,
        4 critical, what `memory_pressure` prints) as 0, 50 or 100; None if unreadable."""
        level = self.sysctl_int("kern.memorystatus_vm_pressure_level")
        return {1: 0.0, 2: 50.0, 4: 100.0}.get(level) if level is not None else None

    def own_peak_rss_bytes(self) -> int:
        """This process's peak RSS: getrusage's ru_maxrss, which macOS reports in bytes."""
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)

    def reset_peak_rss(self, pid: int) -> bool:
        return False  # no clear_refs: the footprint's interval peak is the Darwin counterpart

    def peak_rss(self, pid: int) -> int | None:
        return None

    def pss(self, pid: int) -> int | None:
        return None  # no proportional set size on macOS

    def rusage(self, pid: int) -> RusageInfoV4 | None:
        """proc_pid_rusage(pid, RUSAGE_INFO_V4); None when the process is gone or not ours to read."""
        info = RusageInfoV4()
        return info if self.commands.proc_pid_rusage(pid, RUSAGE_INFO_V4, info) == 0 else None

    def phys_footprint(self, pid: int) -> int | None:
        """Bytes the process is charged for now, Metal allocations in unified memory included (what
        Activity Monitor's Memory column and the memory-pressure killer use)."""
        info = self.rusage(pid)
        return None if info is None else int(info.ri_phys_footprint)

    def lifetime_max_phys_footprint(self, pid: int) -> int | None:
        """The process's phys_footprint peak since it started."""
        info = self.rusage(pid)
        return None if info is None else int(info.ri_lifetime_max_phys_footprint)
