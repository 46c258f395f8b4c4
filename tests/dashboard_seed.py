"""Seeded results for the dashboard's tests, written through the store like a real run.

Two hosts, both engines, two prompt lengths; the same configuration measured twice on one host (one
identity, pooled) and with another llama.cpp version on the other host (another identity, never pooled);
one failed job with an error and stderr tail; two workers in the hosts table.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from siliconbench.contract.jobs import JobSpec, digest
from siliconbench.contract.results import Environment, JobResult, JobStatus, Sample
from siliconbench.contract.spec import SweepSpec

from siliconbench.storage import result_store, sweep_store
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import Host

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
MODEL = "tiny-llama-5m"
HOSTS = {"studio": ("mac-studio-01.local", "Apple M2 Ultra", 192), "mbp": ("mbp-m4.local", "Apple M4 Pro", 48)}
LLAMA_VERSION = {"studio": "0.3.36", "mbp": "0.3.35"}


def job(sweep_id: str, index: int, engine: str, n_prompt: int) -> JobSpec:
    gguf = engine == "llama.cpp"
    j = JobSpec(
        job_id="",
        sweep_id=sweep_id,
        sweep_name=sweep_id.split("-")[0],
        index=index,
        model=MODEL,
        engine=engine,
        quant="F16" if gguf else "f32",
        quant_level="full",
        artifact=f"{MODEL}/{MODEL}-F16.gguf" if gguf else f"{MODEL}/mlx-f32",
        model_sha256=("ab" if gguf else "cd") * 32,
        n_prompt=n_prompt,
        n_gen=32,
        n_depth=0,
        repetitions=3,
        warmup=1,
        delay_s=0.0,
        seed=0,
        timeout_s=900,
        engine_options={"threads": None},
    )
    j.job_id = digest({"sweep": sweep_id, **j.key()})
    return j


def prefill_values(engine: str, host: str, n_prompt: int, run: int) -> list[float]:
    """The measured prefill tokens/s of one seeded result (warmup excluded): distinct per identity."""
    base = (2000.0 if engine == "llama.cpp" else 1000.0) * (1.5 if host == "mbp" else 1.0) * (512 / n_prompt) ** 0.1
    return [base + 10.0 * rep + 3.0 * run for rep in range(3)]


def result(j: JobSpec, host: str, run: int, ok: bool = True) -> JobResult:
    hostname, chip, mem_gb = HOSTS[host]
    gguf = j.engine == "llama.cpp"
    env = Environment(
        hostname=hostname,
        os="Darwin",
        os_version="15.1 (24B83)",
        chip=chip,
        cores=12,
        memory_bytes=mem_gb * 2**30,
        machine="arm64",
        python="3.11.7",
        packages={"llama-cpp-python": LLAMA_VERSION[host]} if gguf else {"mlx": "0.32.4", "mlx-lm": "0.32.2"},
        backend="Metal",
        engine_options={"threads": 12},
    )
    if not ok:
        return JobResult(
            job_id=j.job_id,
            status=JobStatus.failed,
            error="engine error: out of memory while loading",
            stderr_tail="ggml_metal_init: allocating\nerror: out of memory\n",
            started_at=T0,
            finished_at=T0 + timedelta(seconds=2),
            environment=env,
        )
    samples = [Sample(repetition=0, warmup=True, values={"prefill_tps": 500.0, "decode_tps": 50.0, "ttft_ms": 90.0})]
    for rep, v in enumerate(prefill_values(j.engine, host, j.n_prompt, run), start=1):
        values = {"prefill_tps": v, "decode_tps": v / 10 + rep, "ttft_ms": 1000 * j.n_prompt / v}
        if not gguf:  # ~5 GiB with a spread of bytes: where sum(v*v) - sum(v)^2/n would cancel to noise
            values["mlx_peak_memory_bytes"] = 5 * 2**30 + rep + run
        samples.append(Sample(repetition=rep, warmup=False, values=values))
    return JobResult(
        job_id=j.job_id,
        status=JobStatus.ok,
        started_at=T0 + timedelta(minutes=run),
        finished_at=T0 + timedelta(minutes=run, seconds=4),
        wall_s=4.0 + run,
        load_s=0.25,
        peak_memory_bytes=(800 if gguf else 600) * 2**20 + run * 2**20,
        baseline_memory_bytes=2**26,
        samples=samples,
        environment=env,
        extra={"n_ctx": 4096},
    )


def seed(url: str) -> dict:
    """Write the seeded sweeps, results and hosts; returns the sweep ids and the failed job's id."""
    sweeps, failed_id = [], None
    for name, host, run in (("first", "studio", 0), ("again", "studio", 1), ("laptop", "mbp", 0)):
        sid = f"{name}-{host}"
        jobs = [job(sid, i, e, p) for i, (p, e) in enumerate((p, e) for p in (128, 512) for e in ("llama.cpp", "mlx"))]
        spec = SweepSpec(name=name, models=[MODEL], repetitions=3)
        with session_scope(url) as s:
            sweep_store.create_sweep(s, sid, spec, jobs)
        for j in jobs:
            ok = not (host == "mbp" and j.engine == "mlx" and j.n_prompt == 512)
            failed_id = failed_id or (None if ok else j.job_id)
            with session_scope(url) as s:
                sweep_store.mark_running(s, j.job_id, host=HOSTS[host][0], worker=host)
                result_store.save_result(s, j, result(j, host, run, ok), host=HOSTS[host][0], worker=host)
        with session_scope(url) as s:
            sweep_store.refresh_sweep_status(s, sid)
        sweeps.append(sid)
    now = datetime.now(UTC)
    with session_scope(url) as s:
        s.add(
            Host(
                name="studio",
                hostname=HOSTS["studio"][0],
                chip=HOSTS["studio"][1],
                memory_bytes=192 * 2**30,
                os="Darwin",
                info={},
                engines=[{"name": "llama.cpp", "version": "0.3.36"}, {"name": "mlx", "version": "0.32.2"}],
                models=[{"name": MODEL, "artifacts": []}],
                online=True,
                last_heartbeat=now - timedelta(seconds=3),
                current_job_id=None,
            )
        )
        s.add(
            Host(
                name="mbp",
                hostname=HOSTS["mbp"][0],
                chip=HOSTS["mbp"][1],
                memory_bytes=48 * 2**30,
                os="Darwin",
                info={},
                engines=[{"name": "llama.cpp", "version": "0.3.35"}],
                models=[{"name": MODEL, "artifacts": []}],
                online=True,
                last_heartbeat=now - timedelta(hours=2),
                current_job_id=None,
            )
        )
    return {"sweeps": sweeps, "failed_job": failed_id}


def seed_results(url: str, prefill: list[list[float]]) -> list[str]:
    """Results of one identity (studio, llama.cpp, 128 tokens), one sweep each, with these measured prefill
    samples (and a warmup); returns their job ids."""
    ids = []
    for run, values in enumerate(prefill):
        sid = f"pooled{run}-studio"
        j = job(sid, 0, "llama.cpp", 128)
        with session_scope(url) as s:
            sweep_store.create_sweep(
                s, sid, SweepSpec(name=f"pooled{run}", models=[MODEL], repetitions=len(values)), [j]
            )
        samples = [Sample(repetition=0, warmup=True, values={"prefill_tps": 1e6})] + [
            Sample(repetition=rep, warmup=False, values={"prefill_tps": v}) for rep, v in enumerate(values, start=1)
        ]
        r = result(j, "studio", 0).model_copy(update={"samples": samples})
        with session_scope(url) as s:
            sweep_store.mark_running(s, j.job_id, host=HOSTS["studio"][0], worker="studio")
            result_store.save_result(s, j, r, host=HOSTS["studio"][0], worker="studio")
        ids.append(j.job_id)
    return ids
