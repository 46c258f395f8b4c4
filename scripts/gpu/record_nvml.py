"""Record what NVML answers on this host, as siliconbench/worker/platform/nvidia.py asks it, for the tests that replay it
(tests/data/nvml-h200.json came from the lent H200 this way): python3 scripts/gpu/record_nvml.py OUT.json"""

from __future__ import annotations

import json
import sys

import pynvml


def struct(obj) -> dict | list | object:
    if isinstance(obj, list):
        return [struct(o) for o in obj]
    fields = getattr(obj, "_fields_", None)
    if fields:
        return {name: struct(getattr(obj, name)) for name, *_ in fields}
    return obj.decode() if isinstance(obj, bytes) else obj


def main(path: str) -> None:
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    calls = {
        "nvmlDeviceGetName": lambda: pynvml.nvmlDeviceGetName(h),
        "nvmlSystemGetDriverVersion": pynvml.nvmlSystemGetDriverVersion,
        "nvmlSystemGetCudaDriverVersion_v2": pynvml.nvmlSystemGetCudaDriverVersion_v2,
        "nvmlDeviceGetCudaComputeCapability": lambda: list(pynvml.nvmlDeviceGetCudaComputeCapability(h)),
        "nvmlDeviceGetAttributes_v2": lambda: pynvml.nvmlDeviceGetAttributes_v2(h),
        "nvmlDeviceGetAttributes": lambda: pynvml.nvmlDeviceGetAttributes(h),
        "nvmlDeviceGetMemoryBusWidth": lambda: pynvml.nvmlDeviceGetMemoryBusWidth(h),
        "nvmlDeviceGetMaxClockInfo": lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM),
        "nvmlDeviceGetPowerManagementLimit": lambda: pynvml.nvmlDeviceGetPowerManagementLimit(h),
        "nvmlDeviceGetNumGpuCores": lambda: pynvml.nvmlDeviceGetNumGpuCores(h),
        "nvmlDeviceGetMemoryInfo": lambda: pynvml.nvmlDeviceGetMemoryInfo(h),
        "nvmlDeviceGetTotalEnergyConsumption": lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h),
        "nvmlDeviceGetComputeRunningProcesses": lambda: pynvml.nvmlDeviceGetComputeRunningProcesses(h),
        "nvmlDeviceGetCount": pynvml.nvmlDeviceGetCount,
    }
    out = {}
    for name, call in calls.items():
        try:
            out[name] = struct(call())
        except Exception as exc:  # recorded as the error it was: the replay raises it too
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    out["nvmlDeviceGetHandleByIndex"] = "device-0"
    out["_recorded"] = {
        "nvidia-ml-py": getattr(pynvml, "__version__", None),
        "host": "a lent device machine; nvmlDeviceGetName says which GPU",
    }
    with open(path, "w") as f:
        json.dump(out, f, indent=1, default=str)
    print(json.dumps({k: v for k, v in out.items() if k != "nvmlDeviceGetComputeRunningProcesses"}, default=str)[:3000])


if __name__ == "__main__":
    main(sys.argv[1])
