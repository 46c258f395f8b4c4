"""The embedded default: run a sweep in-process on this machine, no broker, results in the database.

A composition above the worker and the coordinator's storage: expansion from the contract, the worker's
`perform_job` (the fleet worker's too: path check, sleep prevention, thermal and busy gates, a fresh
child process; no engine is imported in this process), and the store's idempotent writes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import psutil

from siliconbench.contract.jobs import JobSpec, expand
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.results import JobResult, failed
from siliconbench.contract.spec import SweepSpec

from siliconbench.storage import result_store, sweep_store
from siliconbench.storage.database import session_scope
from siliconbench.worker.envs.venvs import interpreters
from siliconbench.worker.job.perform import perform_job
from siliconbench.worker.platform.host_facts import host_facts
from siliconbench.worker.runtime.files import fetch_missing

JobCallback = Callable[[JobSpec, JobResult], None]
EventCallback = Callable[[JobSpec, dict], None]
T = TypeVar("T")
# How each database write is made: at once (the default), or retried through an outage (the dashboard's runner).
Through = Callable[[Callable[[], T]], T]


def plan(spec: SweepSpec, models_dir: Path, sweep_id: str | None = None) -> list[JobSpec]:
    """Validate and expand: every UserError surfaces here, before anything is written."""
    jobs = expand(spec, ModelCatalog(models_dir), sweep_id=sweep_id)
    if not spec.install_versions and any(j.engine_version for j in jobs):
        interpreters(jobs)  # an engine version this host lacks is refused now, not job by job
    return jobs


def run_sweep(
    spec: SweepSpec,
    jobs: list[JobSpec],
    *,
    database_url: str,
    models_dir: Path,
    on_event: EventCallback | None = None,
    on_done: JobCallback | None = None,
    through: Through | None = None,
) -> str:
    """Store the sweep, run its jobs one at a time in fresh child processes, store each result."""
    pythons = interpreters(jobs, install=spec.install_versions)  # (engine, version) -> interpreter
    sweep_id = jobs[0].sweep_id
    with session_scope(database_url) as s:
        sweep_store.create_sweep(s, sweep_id, spec, jobs)
        sweep_store.set_owner(s, sweep_id, owner_tag())
    return run_jobs(
        sweep_id,
        jobs,
        pythons,
        database_url=database_url,
        models_dir=models_dir,
        on_event=on_event,
        on_done=on_done,
        through=through,
    )


def owner_tag() -> str:
    """Who runs an embedded sweep: this host and process (its start time tells a reused pid apart)."""
    me = psutil.Process()
    return f"embedded {host_facts()['hostname']} pid {me.pid} at {me.create_time():.3f}"


def run_jobs(
    sweep_id: str,
    jobs: list[JobSpec],
    pythons: dict,
    *,
    database_url: str,
    models_dir: Path,
    on_event: EventCallback | None = None,
    on_done: JobCallback | None = None,
    through: Through | None = None,
) -> str:
    """Run the stored sweep's jobs that are not final yet, in order, storing each result.

    Each write is one transaction made by ``through`` (default: at once), which may retry it while the
    database is away: the job's result waits in memory meanwhile (mark_running and save_result are
    idempotent, so a write retried after a commit whose reply was lost does no harm).
    """
    host = host_facts()["hostname"]
    write = through or (lambda fn: fn())

    def in_session(fn):
        def once():
            with session_scope(database_url) as s:
                return fn(s)

        return write(once)

    for job in jobs:
        if not in_session(lambda s: sweep_store.mark_running(s, job.job_id, host=host, worker="embedded")):
            continue  # cancelled (from the dashboard) before it started
        why = fetch_missing(job, database_url)  # a dataset named by digest, where its path no longer holds it
        result = (
            failed(job.job_id, f"{job.workload} error: {why}")
            if why
            else perform_job(
                job,
                models_dir,
                python=pythons.get((job.engine, job.engine_version)),
                on_event=(lambda e, j=job: on_event(j, e)) if on_event else None,
            )
        )
        in_session(lambda s: result_store.save_result(s, job, result, host=host, worker="embedded"))
        if on_done:
            on_done(job, result)
    in_session(lambda s: sweep_store.refresh_sweep_status(s, sweep_id))
    return sweep_id
