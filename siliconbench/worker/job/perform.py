"""`perform_job`: the one way a job runs, whoever asks — the fleet worker (siliconbench/worker/runtime/task.py), the embedded run
(`siliconbench run`) and the dashboard's runner (siliconbench/embedded/run.py), as rq's workers share ``perform_job``.

In order: the artifact path is checked to stay inside the models folder; a file the job names by digest is made
local (siliconbench/worker/job/files.py); the machine is kept awake (no idle
or system sleep: caffeinate / systemd-inhibit) for the job's whole life; then `siliconbench.worker.job.child.run_in_child` applies
the thermal and busy gates and runs the job in a fresh child process of the right interpreter. What
differs between the callers is only how a job is claimed and where its result is written (a lease in
PostgreSQL for the fleet, the sweep's own rows for an embedded run).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from siliconbench.contract.errors import WorkloadError
from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.manifest import inside
from siliconbench.contract.results import JobResult, failed

from siliconbench.worker.job.child import run_in_child
from siliconbench.worker.job.files import local_files
from siliconbench.worker.service.sleep import prevent_sleep


def perform_job(
    job: JobSpec,
    models_dir: Path,
    *,
    python: str | None = None,
    on_event: Callable[[dict], None] | None = None,
) -> JobResult:
    """The job's result; never raises for the job's own failure (see run_in_child). A file the job names by digest
    must be here already: the caller fetched it (siliconbench/worker/runtime/files.py)."""
    if not inside(job.artifact):
        return failed(job.job_id, f"artifact path {job.artifact!r} leads outside the models folder")
    try:
        job = local_files(job)
    except WorkloadError as exc:
        return failed(job.job_id, f"{job.workload} error: {exc}")
    with prevent_sleep(f"siliconbench job {job.job_id}"):
        return run_in_child(job, Path(models_dir), python=python, on_event=on_event)
