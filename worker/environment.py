"""The machine a result was measured on: hardware, OS and Python, read once per child process."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from functools import lru_cache


def _sysctl(name: str) -> str:
    try:
        return subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _linux_cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _linux_os_version() -> str:
    pretty = ""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    pretty = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return f"{pretty} (kernel {platform.release()})".strip()


def _memory_bytes() -> int:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except ImportError:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


@lru_cache(maxsize=1)
def host_facts() -> dict:
    """hostname, os, os_version, chip, cores, memory_bytes, machine, python."""
    if sys.platform == "darwin":
        mac, _, _ = platform.mac_ver()
        build = _sysctl("kern.osversion")
        os_version = f"macOS {mac} ({build})"
        chip = _sysctl("machdep.cpu.brand_string") or platform.processor()
    else:
        os_version = _linux_os_version()
        chip = _linux_cpu_model()
    return {
        "hostname": socket.gethostname(),
        "os": platform.system(),
        "os_version": os_version,
        "chip": chip,
        "cores": os.cpu_count() or 1,
        "memory_bytes": _memory_bytes(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }
