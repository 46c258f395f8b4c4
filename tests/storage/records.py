"""Jobs and results of the storage tests, built by hand: a quickstart sweep of four jobs, their environments and results."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from siliconbench.contract.aggregate import summarize
from siliconbench.contract.jobs import JobSpec, digest, spec_digest
from siliconbench.contract.results import Environment, JobResult, JobStatus, Sample
from siliconbench.contract.spec import SweepSpec

from siliconbench.storage import watch_tables  # noqa: F401  (the watch's tables are on Base.metadata too)
from siliconbench.storage.summaries import RESULT_METRICS

T0 = datetime(2026, 12, 1, 9, 30, 0, 123456, tzinfo=UTC)


SPEC = SweepSpec(name="quickstart", models=["tiny-llama-5m"], engines=["llama.cpp", "mlx"], repetitions=3, warmup=1)


SWEEP_ID = f"quickstart-{spec_digest(SPEC)}"


def make_job(engine: str, index: int, sweep_id: str = SWEEP_ID, n_prompt: int = 512) -> JobSpec:
    gguf = engine == "llama.cpp"
    job = JobSpec(
        job_id="",
        sweep_id=sweep_id,
        sweep_name="quickstart",
        index=index,
        model="tiny-llama-5m",
        engine=engine,
        quant="F16" if gguf else "f32",
        quant_level="full",
        artifact="tiny-llama-5m/tiny-llama-5m-F16.gguf" if gguf else "tiny-llama-5m/mlx-f32",
        model_sha256=("ab" if gguf else "cd") * 32,
        n_prompt=n_prompt,
        n_gen=128,
        n_depth=0,
        repetitions=3,
        warmup=1,
        delay_s=0.0,
        seed=0,
        timeout_s=900,
        engine_options={
            "threads": None,
            **(
                {"n_gpu_layers": -1, "use_mmap": True, "n_batch": 2048, "n_ubatch": 512, "flash_attn": False}
                if gguf
                else {"blas": "auto", "prefill_step_size": 2048}
            ),
        },
    )
    job.job_id = digest({"sweep": sweep_id, **job.key()})
    return job


def make_env(engine: str) -> Environment:
    gguf = engine == "llama.cpp"
    return Environment(
        hostname="mac-studio-01.local",
        os="Darwin",
        os_version="15.1 (24B83)",
        chip="Apple M2 Ultra",
        cores=24,
        memory_bytes=192 * 2**30,
        machine="arm64",
        python="3.11.7",
        packages={"llama-cpp-python": "0.3.36"} if gguf else {"mlx": "0.32.4", "mlx-lm": "0.32.2"},
        engine_build={"ggml_commit": "0c1e570-dirty", "llama_version": "6640"} if gguf else {},
        backend="Metal",
        blas="" if gguf else "bundled",
        engine_options={"threads": 24},
    )


def make_result(job: JobSpec, noisy: bool = False) -> JobResult:
    gguf = job.engine == "llama.cpp"
    samples = []
    for rep in range(job.warmup + job.repetitions):
        warm = rep < job.warmup
        k = 0.61 if warm else 1.0 + 0.0173 * rep * (12 if noisy else 1)
        values = {"prefill_tps": 2044.3127 * k, "decode_tps": 254.987 / k, "ttft_ms": 250.4411 / k}
        if gguf:
            values |= {"engine_prefill_tps": 2051.1 * k, "engine_decode_tps": 256.03 / k}
        else:
            values |= {"mlx_peak_memory_bytes": 58_720_256.0 + rep}
        samples.append(Sample(repetition=rep, warmup=warm, values=values))
    return JobResult(
        job_id=job.job_id,
        status=JobStatus.ok,
        stderr_tail="llama_model_load: loaded meta data\n",
        started_at=T0,
        finished_at=T0 + timedelta(seconds=4.25),
        wall_s=4.25,
        load_s=0.3125,
        peak_memory_bytes=5_368_709_120 + job.index,
        baseline_memory_bytes=104_857_600,
        samples=samples,
        environment=make_env(job.engine),
        extra={"n_ctx": 2048, "vocab_size": 512},
    )


JOBS = [
    make_job("llama.cpp", 0),
    make_job("mlx", 1),
    make_job("llama.cpp", 2, n_prompt=128),
    make_job("mlx", 3, n_prompt=128),
]


def expected_summaries(stored) -> dict:
    """{(job id, metric): Summary} a stored result's summaries must equal: ``summarize`` of each sampled metric,
    and of the one value of each results-row metric."""
    want = {}
    for x in stored:
        for m in {m for smp in x.result.samples for m in smp.values}:
            if (w := x.result.summary(m)) is not None:
                want[(x.job.job_id, m)] = w
        for m in RESULT_METRICS:  # the results row's one-value metrics: summaries of one value
            if getattr(x.result, m) is not None:
                want[(x.job.job_id, m)] = summarize([getattr(x.result, m)])
    return want
