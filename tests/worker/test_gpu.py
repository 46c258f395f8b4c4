"""On a CUDA host (the lent H200: scripts/gpu/run.sh): both engines' jobs on the GPU, through the same child process
as every job, with the device's memory, energy, offload and roofline recorded. Marked ``gpu``: deselected
everywhere else (pyproject's addopts say ``-m "not gpu"``); run with ``pytest -m gpu tests/worker/test_gpu.py``."""

from __future__ import annotations

import pytest

from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.spec import parse_sweep

from siliconbench.worker.job.child import run_in_child
from siliconbench.worker.platform.nvidia import Nvml
from tests.conftest import SMALL

pytestmark = pytest.mark.gpu


def _jobs(models_dir, engine: str, quant: str, gen: int = 256):
    spec = parse_sweep(
        {
            "name": "gpu",
            "models": [SMALL],
            "engines": [engine],
            "quantizations": [quant],
            "repetitions": 3,
            "warmup": 1,
            "full_dtype": "f16",
            "workloads": [{"kind": "generate", "prompt_tokens": [512], "gen_tokens": [gen], "depth": [0]}],
        }
    )
    return expand(spec, ModelCatalog(models_dir))


def test_nvml_sees_the_gpu():
    nvml = Nvml.open()
    assert nvml is not None
    facts = nvml.facts()
    assert facts["name"] and facts["memory_bytes"] > 2**30 and facts["driver"]
    assert facts["bandwidth_theoretical_gbs"] and facts["bandwidth_theoretical_gbs"] > 100


@pytest.mark.parametrize(
    "engine, quant", [("llama.cpp", "F16"), ("llama.cpp", "Q4_K_M"), ("mlx", "f16"), ("mlx", "4bit")]
)
def test_a_job_runs_on_the_gpu_with_device_memory_and_energy(models_dir, engine, quant):
    (job,) = _jobs(models_dir, engine, quant)
    res = run_in_child(job, models_dir)
    assert res.status == "ok", (res.error, res.stderr_tail)
    env = res.environment
    assert env.backend == "CUDA", env.backend
    assert env.host_details["gpu"]["name"]
    measured = [s for s in res.samples if not s.warmup and "decode_tps" in s.values]
    assert all(s.values["device_memory_peak_bytes"] > 0 for s in measured)
    assert res.extra["device_memory"]["peak_device_memory_bytes"] > 0
    assert res.extra["roofline"]["bandwidth_source"].endswith(("datasheet", "memory clock"))
    if engine == "llama.cpp":
        done, total = env.engine_options["gpu_layers_offloaded"].split("/")
        assert done == total  # every layer on the GPU by default
        assert any(k.startswith("CUDA") for k in res.extra["device_memory"]["llama_buffers_mib"])
    else:
        assert env.blas.startswith("none")  # no OpenBLAS preload for MLX on CUDA
    # energy: one sample of its own, read over windows of >= 1 s after the timed repetitions
    (energy,) = [s for s in res.samples if "decode_j_per_token" in s.values]
    assert "decode_tps" not in energy.values  # no timed region holds a counter read
    assert energy.values["prefill_j_per_token"] > 0 and energy.values["decode_j_per_token"] > 0
    assert 20 < energy.values["decode_gpu_watts"] < 1500
