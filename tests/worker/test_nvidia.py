"""The NVIDIA side of the platform seam on NVML's own answers, recorded on the lent H200 by
scripts/gpu/record_nvml.py (tests/data/nvml-h200.json): facts, selectors, the roofline's bound, device memory and
energy; and llama.cpp's load log read for offload and buffers."""

from __future__ import annotations

from pathlib import Path

from siliconbench.contract.spec import parse_sweep

from siliconbench.coordinator.fleet.placement import HostView, select_hosts
from siliconbench.worker.engines.llama_cpp import buffers, offloaded_layers
from siliconbench.worker.measure import roofline
from siliconbench.worker.platform.nvidia import DeviceMeter, Nvml, Recorded, datasheet_gbs

H200 = Path(__file__).resolve().parents[1] / "data" / "nvml-h200.json"


def nvml(**over) -> Nvml:
    rec = Recorded.load(H200)
    rec.answers.update(over)
    return Nvml(rec)


def test_facts_from_the_h200s_answers():
    f = nvml().facts()
    assert f["name"] == "NVIDIA H200" and f["driver"] == "580.159.04" and f["cuda_driver"] == "13.0"
    assert f["compute_capability"] == "9.0" and f["memory_bytes"] == 150_754_820_096
    # NVML says NotSupported for the SM count outside MIG: 16,896 CUDA cores / 128 per Hopper SM
    assert f["sm_count"] == 132 and f["cuda_cores"] == 16_896
    # 6,016-bit bus x 2 transfers x 3,201 MHz = 4,814 GB/s, beside the datasheet's 4.8 TB/s
    assert f["bandwidth_theoretical_gbs"] == 4814.3 and f["bandwidth_datasheet_gbs"] == 4800.0
    assert f["power_limit_w"] == 700.0


def test_datasheet_names_are_matched_most_specific_first():
    assert datasheet_gbs("NVIDIA H100 PCIe") == 2000.0 and datasheet_gbs("NVIDIA H100 80GB HBM3") == 3350.0
    assert datasheet_gbs("NVIDIA A100-SXM4-80GB") == 2039.0 and datasheet_gbs("Tesla T4") is None


def test_device_memory_per_process_or_the_devices_rise_and_energy():
    procs = [{"pid": 4242, "usedGpuMemory": 3 * 2**30}, {"pid": 7, "usedGpuMemory": 2**30}]
    meter = DeviceMeter(nvml(nvmlDeviceGetComputeRunningProcesses=procs), pid=4242)
    meter.reset_peak()
    assert meter.repetition_peak() == 3 * 2**30
    assert meter.stop() == {"peak_device_memory_bytes": 3 * 2**30, "source": "nvml per-process"}
    assert meter.energy_mj() == 5_795_318
    hidden = DeviceMeter(nvml(nvmlDeviceGetComputeRunningProcesses=[]), pid=4242)  # a container hiding pids
    hidden.nvml.lib.answers["nvmlDeviceGetMemoryInfo"] = {"total": 1, "free": 0, "used": 644_939_776 + 2**30}
    got = hidden.stop()
    assert got["peak_device_memory_bytes"] == 2**30 and got["source"].startswith("nvml device used")


def test_hosts_are_selected_by_gpu_name():
    a = HostView(
        name="h200-box",
        online=True,
        chip="Intel Xeon",
        memory_bytes=2**40,
        engines={"llama.cpp": "0.3.36"},
        details={"gpu": nvml().facts()},
    )
    mac = HostView(name="mini", online=True, chip="Apple M4", memory_bytes=2**34, engines={"mlx": "0.32.2"})
    spec = parse_sweep({"name": "g", "models": ["m"], "hosts": {"gpu": "h200"}})
    assert [h.name for h in select_hosts(spec, [a, mac])] == ["h200-box"]


def test_the_roofline_bound_on_a_cuda_backend_is_the_gpus():
    record = roofline.gpu_record(nvml().facts(), weights=4_900_000_000, kv=1_000_000)
    assert record["bandwidth_gbs"] == 4800.0 and record["bandwidth_source"] == "NVIDIA H200 datasheet"
    assert record["bound_tps"] == round(4800e9 / 4_901_000_000, 2)


def test_llamas_load_log_says_what_was_offloaded_and_allocated():
    log = [
        "load_tensors: offloading 16 repeating layers to GPU\n",
        "load_tensors: offloaded 17/17 layers to GPU\n",
        "load_tensors:        CUDA0 model buffer size =   903.71 MiB\n",
        "load_tensors:   CPU_Mapped model buffer size =   250.50 MiB\n",
        "llama_kv_cache:      CUDA0 KV buffer size =    64.00 MiB\n",
        "llama_context:      CUDA0 compute buffer size =   258.50 MiB\n",
    ]
    assert offloaded_layers(log) == "17/17"
    assert buffers(log) == {"CUDA0 model": 903.71, "CPU_Mapped model": 250.5, "CUDA0 KV": 64.0, "CUDA0 compute": 258.5}
