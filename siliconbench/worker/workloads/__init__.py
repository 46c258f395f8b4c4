"""Workloads, one module per kind (siliconbench.contract.workloads.KINDS: generate, swap, restart, concurrent, serve,
long_context, perplexity, multiprocess), each with ``run(ctx) -> Outcome``; ``run_workload`` turns any of them into the job's
one result. A module may set ``SIGTERM_UNWINDS = False`` where a cancelled job should die at once."""

from __future__ import annotations

import importlib
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from siliconbench.contract.errors import WorkloadError
from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.results import Environment, JobResult, JobStatus, contract_problems, failed
from siliconbench.contract.workloads import KINDS

from siliconbench.worker.builds import driver
from siliconbench.worker.builds.tool import ToolEngine
from siliconbench.worker.platform.host_facts import host_facts
from siliconbench.worker.platform.nvidia import DeviceMeter, Nvml
from siliconbench.worker.platform.threads import openmp_wait
from siliconbench.worker.serving import served_build
from siliconbench.worker.serving.process import kill_live_groups
from siliconbench.worker.serving.served_build import ServedBuild
from siliconbench.worker.workloads.common import Context, engine_for, footprint_peak_bytes, rss_peak_bytes

_scratch: list[Path] = []  # this process's workload folder, for remove_scratch


def remove_scratch() -> None:
    """Remove the workload's scratch folder now: the process is about to leave without unwinding (its worker died)."""
    for d in _scratch:
        shutil.rmtree(d, ignore_errors=True)


def with_build(engine, job: JobSpec) -> dict:
    """The engine's own description, with the llama.cpp build's record where the job ran on one, and the OpenMP
    wait variables llama.cpp's threads ran under where any is set."""
    described = engine.describe()
    if job.engine == "llama.cpp" and (wait := openmp_wait()):
        described = {**described, "engine_options": {**(described.get("engine_options") or {}), "openmp": wait}}
    build = driver.current()
    if build is None:
        return described
    if isinstance(engine, ToolEngine):
        path = "llama-bench"
    elif isinstance(engine, ServedBuild):
        path = served_build.MEASURED_BY
    else:
        path = "binding"
    return driver.facts(build, path, described)


def run_workload(job: JobSpec, models_dir: Path, emit: Callable[..., None]) -> JobResult:
    """Run ``job`` in this (fresh) process; a WorkloadError becomes a failed result with its reason."""
    if job.workload not in KINDS:
        raise ValueError(f"unknown workload {job.workload!r}; known: {', '.join(KINDS)}")
    module = importlib.import_module(f"{__name__}.{job.workload}")
    if getattr(module, "SIGTERM_UNWINDS", True):
        # SIGTERM (a cancelled or stopped worker) must still run the finally blocks that stop servers.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = datetime.now(UTC)
    nvml = Nvml.open()  # a CUDA host: the job's device memory and the GPU's energy (None elsewhere)
    meter = DeviceMeter(nvml).start() if nvml else None
    with tempfile.TemporaryDirectory(prefix=f"sb-{job.workload}-") as tmp:
        _scratch.append(Path(tmp))
        emit("scratch", path=tmp)  # the runner removes it if this process is killed (a job past its time limit)
        ctx = Context(job=job, models_dir=models_dir, emit=emit, workdir=Path(tmp), meter=meter)
        try:
            out = module.run(ctx)
        except WorkloadError as exc:
            env = Environment(**host_facts(), **with_build(engine_for(job), job))
            return failed(
                job.job_id,
                f"{job.workload} error: {exc}",
                getattr(exc, "log_tail", None),
                started_at=started,
                environment=env,
            )
        finally:
            kill_live_groups()  # normally none: each workload stops its servers itself
    env = Environment(**host_facts(), **with_build(out.engine, job))
    extra = {"workload": job.workload, **out.extra}
    device = {**(meter.stop() if meter else {}), **out.device_memory}
    if device:
        extra["device_memory"] = device
    result = JobResult(
        job_id=job.job_id,
        status=JobStatus.ok,
        started_at=started,
        load_s=out.load_s,
        peak_memory_bytes=rss_peak_bytes() if out.own_peak else None,
        peak_footprint_bytes=footprint_peak_bytes() if out.own_peak else None,
        baseline_memory_bytes=out.baseline_memory_bytes,
        baseline_footprint_bytes=out.baseline_footprint_bytes,
        samples=out.samples,
        environment=env,
        extra=extra,
    )
    problems = contract_problems(result, job.workload)
    if problems:  # a figure the registry does not define is never stored as a result
        return failed(
            job.job_id, "result outside the contract: " + "; ".join(problems), started_at=started, environment=env
        )
    return result
