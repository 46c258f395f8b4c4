"""The NVIDIA side of the platform seam: a CUDA host's GPU as NVML (nvidia-ml-py) reports it, not nvidia-smi's text.

- ``gpu_facts()``: name, memory, driver, CUDA driver version, compute capability, SM count, memory bus width and
  clock, the theoretical memory bandwidth they give (bus bytes x 2 transfers x memory clock: HBM and GDDR are
  double data rate at NVML's clock) beside the datasheet's figure (``DATASHEET_GBS``, sourced), and power limit.
  Part of a host's identity (``host_details.gpu``), and what ``hosts: {gpu: H200}`` selects on.
- ``DeviceMeter``: for one job's process, its peak device memory (sampled from NVML's per-process accounting) and
  the GPU's cumulative energy counter around timed regions (``energy_mj``).

Everything goes through an ``Nvml`` over a library object with pynvml's function names: the real ``pynvml``, or
``Recorded`` answers (tests/data/nvml-h200.json, recorded on the lent H200 by scripts/gpu/record_nvml.py).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

# Peak memory bandwidth from the vendor's datasheets (GB/s), by a substring of NVML's device name:
# H200 SXM 4.8 TB/s (nvidia.com/en-us/data-center/h200, "GPU Memory Bandwidth"); H100 SXM 3.35 TB/s and H100 NVL /
# PCIe 3.9 / 2.0 TB/s (nvidia.com/en-us/data-center/h100 datasheet); A100 80GB SXM 2,039 GB/s, A100 40GB 1,555 GB/s
# (A100 datasheet); L40S 864 GB/s (L40S datasheet); RTX 4090 1,008 GB/s and RTX 3090 936 GB/s (GeForce spec pages).
DATASHEET_GBS: tuple[tuple[str, float], ...] = (
    ("H200", 4800.0),
    ("H100 NVL", 3900.0),
    ("H100 PCIe", 2000.0),
    ("H100", 3350.0),
    ("A100-SXM4-80GB", 2039.0),
    ("A100 80GB", 2039.0),
    ("A100", 1555.0),
    ("L40S", 864.0),
    ("RTX 4090", 1008.0),
    ("RTX 3090", 936.0),
)
# FP32 cores per SM by compute capability (CUDA C++ Programming Guide, throughput of native arithmetic
# instructions): NVML's device attributes (multiprocessorCount) answer NotSupported outside MIG, as on the H200,
# so the SM count is its CUDA cores over these.
CORES_PER_SM = {
    "7.0": 64,
    "7.5": 64,
    "8.0": 64,
    "8.6": 128,
    "8.7": 128,
    "8.9": 128,
    "9.0": 128,
    "10.0": 128,
    "12.0": 128,
}
SAMPLE_S = 0.02  # NVML's per-process memory is a cheap query; 20 ms catches allocations that live longer


def datasheet_gbs(name: str) -> float | None:
    return next((gbs for key, gbs in DATASHEET_GBS if key.lower() in name.lower()), None)


class Recorded:
    """pynvml's functions answering from a recording: {function name: answer} for device 0."""

    NVML_CLOCK_MEM = 2

    def __init__(self, answers: dict):
        self.answers = answers

    @classmethod
    def load(cls, path: Path) -> Recorded:
        return cls(json.loads(Path(path).read_text()))

    def __getattr__(self, name: str):
        answers = self.__dict__["answers"]
        if name not in answers:
            raise AttributeError(name)
        value = answers[name]

        def call(*_args):
            if isinstance(value, dict) and "error" in value:
                raise RuntimeError(value["error"])
            return _obj(value)

        return call


def _obj(value):
    """A recorded struct (dict) read back with attribute access, as pynvml's ctypes structs are read."""
    if isinstance(value, dict):
        return type("Struct", (), {k: _obj(v) for k, v in value.items()})()
    if isinstance(value, list):
        return [_obj(v) for v in value]
    return value


class Nvml:
    def __init__(self, lib, index: int = 0):
        self.lib = lib
        self.handle = lib.nvmlDeviceGetHandleByIndex(index)

    @classmethod
    def open(cls) -> Nvml | None:
        """The real NVML, or None where there is no NVIDIA driver or no nvidia-ml-py (every Mac, this CI)."""
        try:
            import pynvml  # nvidia-ml-py: the [cuda] extra, present on CUDA hosts only
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
            if pynvml.nvmlDeviceGetCount() < 1:
                return None
            return cls(pynvml)
        except Exception:  # pynvml.NVMLError and friends: no driver, no device
            return None

    def _try(self, fn: str, *args):
        try:
            return getattr(self.lib, fn)(*args)
        except Exception:
            return None

    def facts(self) -> dict:
        lib, h = self.lib, self.handle
        name = lib.nvmlDeviceGetName(h)
        name = name.decode() if isinstance(name, bytes) else name
        driver = lib.nvmlSystemGetDriverVersion()
        cuda = self._try("nvmlSystemGetCudaDriverVersion_v2")
        cc = self._try("nvmlDeviceGetCudaComputeCapability", h)
        attrs = self._try("nvmlDeviceGetAttributes_v2", h) or self._try("nvmlDeviceGetAttributes", h)
        bus_bits = self._try("nvmlDeviceGetMemoryBusWidth", h)
        mem_mhz = self._try("nvmlDeviceGetMaxClockInfo", h, getattr(lib, "NVML_CLOCK_MEM", 2))
        power = self._try("nvmlDeviceGetPowerManagementLimit", h)
        theoretical = bus_bits / 8 * 2 * mem_mhz * 1e6 / 1e9 if bus_bits and mem_mhz else None
        capability = f"{cc[0]}.{cc[1]}" if cc else None
        cores = self._try("nvmlDeviceGetNumGpuCores", h)
        sm = getattr(attrs, "multiprocessorCount", None) if attrs else None
        if sm is None and cores and capability in CORES_PER_SM:
            sm = cores // CORES_PER_SM[capability]
        return {
            "name": name,
            "memory_bytes": int(lib.nvmlDeviceGetMemoryInfo(h).total),
            "driver": driver.decode() if isinstance(driver, bytes) else driver,
            "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
            "compute_capability": capability,
            "sm_count": sm,
            "cuda_cores": cores,
            "memory_bus_bits": bus_bits,
            "memory_clock_mhz": mem_mhz,
            "bandwidth_theoretical_gbs": round(theoretical, 1) if theoretical else None,
            "bandwidth_datasheet_gbs": datasheet_gbs(name),
            "power_limit_w": power / 1000 if power else None,
        }

    def process_memory(self, pid: int) -> int | None:
        """Device memory NVML charges to ``pid`` (None: NVML does not list it, e.g. before its first allocation)."""
        procs = self._try("nvmlDeviceGetComputeRunningProcesses", self.handle) or []
        used = [p.usedGpuMemory for p in procs if p.pid == pid and p.usedGpuMemory is not None]
        return int(sum(used)) if used else None

    def used_memory(self) -> int:
        return int(self.lib.nvmlDeviceGetMemoryInfo(self.handle).used)

    def energy_mj(self) -> int | None:
        """The GPU's energy counter since the driver loaded, in mJ (Volta and later)."""
        return self._try("nvmlDeviceGetTotalEnergyConsumption", self.handle)


def gpu_facts() -> dict | None:
    nvml = Nvml.open()
    return nvml.facts() if nvml else None


class DeviceMeter:
    """One job process's device memory peak, sampled in a thread, and energy readings for timed regions.

    NVML charges memory per process where the driver can see the process's pid; where it cannot (a container
    that hides pids), the device's used memory above what it was before the job's model loaded is the
    fallback, and ``source`` says which."""

    def __init__(self, nvml: Nvml, pid: int | None = None):
        self.nvml, self.pid = nvml, pid or os.getpid()
        self.baseline_used = nvml.used_memory()
        self.peak_process = 0
        self.peak_device_delta = 0
        self.rep_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def start(self) -> DeviceMeter:
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.sample()
            time.sleep(SAMPLE_S)

    def sample(self) -> None:
        mine = self.nvml.process_memory(self.pid)
        delta = self.nvml.used_memory() - self.baseline_used
        if mine is not None:
            self.peak_process = max(self.peak_process, mine)
        self.peak_device_delta = max(self.peak_device_delta, delta)
        self.rep_peak = max(self.rep_peak, mine if mine is not None else delta)

    def reset_peak(self) -> None:
        """Start a repetition's own peak (the job's peak keeps running)."""
        self.rep_peak = 0
        self.sample()

    def repetition_peak(self) -> float:
        self.sample()
        return float(self.rep_peak)

    def stop(self) -> dict:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1)
        self.sample()
        if self.peak_process:
            return {"peak_device_memory_bytes": self.peak_process, "source": "nvml per-process"}
        return {
            "peak_device_memory_bytes": self.peak_device_delta or None,
            "source": "nvml device used above the job's start (the process was not listed)",
        }

    def energy_mj(self) -> int | None:
        return self.nvml.energy_mj()
