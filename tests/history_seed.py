"""Seeded histories for compare and regressions tests: stored results with fixed-seed samples.

The clock and the numbers are fixed here (not the engines): each result is what a job of the given
engine version would store, with samples drawn around a chosen median, so a test knows where a step is.
"""

from __future__ import annotations

import random
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

from siliconbench.contract.jobs import JobSpec, digest
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.results import Environment, JobResult, JobStatus, Sample
from siliconbench.contract.spec import MlxOptions, parse_sweep

from siliconbench.storage import result_store, sweep_store
from siliconbench.storage.database import session_scope
from tests.envs_support import OTHER_MLX_LM

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
MLX_OPTIONS = {"threads": None, **MlxOptions().model_dump()}  # what a sweep's MLX job records


def env(hostname: str, packages: dict[str, str], **kw) -> Environment:
    return Environment(
        hostname=hostname,
        os="Linux",
        os_version=kw.pop("os_version", "Debian 12"),
        chip="EPYC",
        cores=2,
        memory_bytes=24 << 30,
        machine="x86_64",
        python="3.11.7",
        packages=packages,
        engine_build=kw.pop("engine_build", {}),
        backend="CPU",
        blas=kw.pop("blas", "openblas"),
        engine_options=kw.pop("engine_options", MLX_OPTIONS),
    )


def seed_results(
    url: str,
    models_dir: Path,
    runs: list[dict],
    *,
    sweep: str = "history",
    seed: int = 0,
    n_prompt: int = 64,
    n_gen: int = 16,
    reps: int = 5,
    cv: float = 0.01,
    between_cv: float = 0.01,
) -> list[JobSpec]:
    """One sweep per run: ``runs`` items give mlx-lm version, medians per metric, and optionally host/day and
    ``processes`` (jobs of the run, default 1), each process off the median by ``between_cv``.

    The job is the real tiny model's MLX f32 artifact, so a confirmation can rerun it.
    """
    rng = random.Random(seed)
    m = ModelCatalog(models_dir).get("tiny-llama-5m")
    art = m.artifact_for("mlx", "full")
    jobs = []
    for i, run in enumerate(runs):
        host = run.get("host", socket.gethostname())
        sid = f"{sweep}-{i:03d}"
        n = run.get("processes", 1)
        spec = parse_sweep(
            {
                "name": sweep,
                "models": [m.name],
                "engines": ["mlx"],
                "repetitions": reps,
                "processes": n,
                "workloads": [{"kind": "generate", "prompt_tokens": [n_prompt], "gen_tokens": [n_gen]}],
            }
        )
        run_jobs, results = [], []
        for k in range(n):
            job = JobSpec(
                job_id="",
                sweep_id=sid,
                sweep_name=sweep,
                index=k,
                model=m.name,
                engine="mlx",
                quant=art.quant,
                quant_level=art.level,
                artifact=f"{m.name}/{art.path}",
                model_sha256=art.sha256,
                n_prompt=n_prompt,
                n_gen=n_gen,
                n_depth=0,
                repetitions=reps,
                warmup=1,
                delay_s=0.0,
                seed=0,
                timeout_s=300,
                engine_options=MLX_OPTIONS,
                engine_version=run.get("label"),
                process=k,
            )
            job.job_id = digest({"sweep": sid, **job.key()})
            when = T0 + timedelta(days=run.get("day", i), minutes=k)
            shift = 1 + rng.gauss(0, between_cv)  # what this process's layout and placement cost it
            samples = [
                Sample(
                    repetition=r, values={key: v * shift * (1 + rng.gauss(0, cv)) for key, v in run["medians"].items()}
                )
                for r in range(reps)
            ]
            packages = {"mlx": run.get("mlx", "0.32.4"), "mlx-lm": run["mlx_lm"]}
            results.append(
                JobResult(
                    job_id=job.job_id,
                    status=JobStatus.ok,
                    started_at=when,
                    finished_at=when + timedelta(seconds=5),
                    load_s=0.05,
                    peak_memory_bytes=120 << 20,
                    baseline_memory_bytes=100 << 20,
                    samples=samples,
                    environment=env(host, packages, os_version=run.get("os", "Debian 12")),
                )
            )
            run_jobs.append(job)
        with session_scope(url) as s:
            sweep_store.create_sweep(s, sid, spec, run_jobs)
            for job, res in zip(run_jobs, results, strict=True):
                result_store.save_result(s, job, res, host=host, worker="seed")
        jobs += run_jobs
    return jobs


OWN_MLX_LM = "0.32.2"


def history(url, models_dir, *, confirmable: bool = False):
    """mlx-lm 0.30.7 x4, 0.31.3 x4, then 0.32.2 x4 with decode 12% slower; prefill flat throughout.

    Four results a version: the fewest processes a side whose Mann-Whitney U can reach p < 0.05."""
    versions = ["0.30.7"] * 4 + [OTHER_MLX_LM] * 4 + [OWN_MLX_LM] * 4
    if confirmable:
        versions = versions[4:]
    runs = [
        {
            "mlx_lm": v,
            "day": i,
            "medians": {
                "prefill_tps": 5000.0,
                "ttft_ms": 12.0,
                "decode_tps": 400.0 * (0.88 if v == OWN_MLX_LM else 1.0),
            },
        }
        for i, v in enumerate(versions)
    ]
    # Backfilled: 0.30.7 measured last still sorts first, by version.
    if not confirmable:
        for r in runs[:4]:
            r["day"] += 30
    return seed_results(url, models_dir, runs, sweep="nightly")
