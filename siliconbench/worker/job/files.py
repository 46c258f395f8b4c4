"""A job's large user files at a local path before it runs: each file the job names by digest (``JobSpec.files``) is
used where it was read when that path holds its bytes (the machine that expanded the sweep), else from this
machine's cache of stored files (``<data dir>/files``), which the worker fills from the sweep's database before the
job (siliconbench/worker/runtime/files.py). The child then reads a path that holds exactly the digest the job names.
No database here: a job's process never opens one."""

from __future__ import annotations

from pathlib import Path

from siliconbench.contract.errors import WorkloadError
from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.settings import data_dir
from siliconbench.contract.workloads.base import FILE_SUFFIX, file_digest


def cache_path(digest: str) -> Path:
    return data_dir() / "files" / digest.replace(":", "-")


def located(job: JobSpec) -> dict[str, tuple[str, Path | None]]:
    """{key: (digest, the local path holding it, or None)} of each file the job names: where it was read, else the
    cache."""
    out = {}
    for key, where in job.files.items():
        digest = job.params[key.removesuffix(FILE_SUFFIX)]
        found = next((p for p in (Path(where), cache_path(digest)) if p.is_file() and file_digest(p) == digest), None)
        out[key] = (digest, found)
    return out


def missing(job: JobSpec) -> dict[str, str]:
    """{setting: digest} of the files the job names that neither their path nor the cache holds here."""
    return {key.removesuffix(FILE_SUFFIX): digest for key, (digest, found) in located(job).items() if found is None}


def local_files(job: JobSpec) -> JobSpec:
    """The job with every file it names at a local path holding the digest it names; WorkloadError where none does."""
    if not job.files:
        return job
    placed = {}
    for key, (digest, found) in located(job).items():
        if found is None:
            raise WorkloadError(
                f"{job.files[key]} no longer holds {digest} ({key.removesuffix(FILE_SUFFIX)}) and this machine has no "
                "copy of it: the worker fetches one from the sweep's database before the job"
            )
        placed[key] = str(found)
    return job.model_copy(update={"files": placed})
