"""The embedded default: run a sweep in-process on this machine, no broker, results in the database.

The same pieces the fleet uses: expansion from the contract, the worker's child-process runner (which
imports no engine in this process), and the store's idempotent writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from siliconbench.jobs import JobSpec, expand
from siliconbench.manifest import ModelCatalog
from siliconbench.results import JobResult
from siliconbench.spec import SweepSpec

from . import store
from .database import session_scope

JobCallback = Callable[[JobSpec, JobResult], None]
EventCallback = Callable[[JobSpec, dict], None]


def plan(spec: SweepSpec, models_dir: Path, sweep_id: str | None = None) -> list[JobSpec]:
    """Validate and expand: every UserError surfaces here, before anything is written."""
    return expand(spec, ModelCatalog(models_dir), sweep_id=sweep_id)


def run_sweep(
    spec: SweepSpec,
    jobs: list[JobSpec],
    *,
    database_url: str,
    models_dir: Path,
    on_event: EventCallback | None = None,
    on_done: JobCallback | None = None,
) -> str:
    """Store the sweep, run its jobs one at a time in fresh child processes, store each result."""
    from worker.child import run_job
    from worker.environment import host_facts

    sweep_id = jobs[0].sweep_id
    host = host_facts()["hostname"]
    with session_scope(database_url) as s:
        store.create_sweep(s, sweep_id, spec, jobs)
    for job in jobs:
        with session_scope(database_url) as s:
            store.mark_running(s, job.job_id, host=host, worker="embedded")
        result = run_job(job, models_dir, on_event=(lambda e, j=job: on_event(j, e)) if on_event else None)
        with session_scope(database_url) as s:
            store.save_result(s, job, result, host=host, worker="embedded")
        if on_done:
            on_done(job, result)
    return sweep_id
