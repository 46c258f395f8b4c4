"""Before a job runs here, the large user files it names by digest and this machine lacks are fetched from the sweep's
database into the local cache (siliconbench.storage.user_files; siliconbench/worker/job/files.py reads them there).
Called by the fleet worker and the embedded run alike, before ``perform_job``."""

from __future__ import annotations

from siliconbench.contract.jobs import JobSpec

from siliconbench.storage import user_files
from siliconbench.storage.database import session_scope
from siliconbench.worker.job.files import cache_path, missing


def fetch_missing(job: JobSpec, database_url: str) -> str | None:
    """Fetch what the job lacks here; why it could not, or None (the job then finds every file locally)."""
    for setting, digest in missing(job).items():
        try:
            with session_scope(database_url) as s:
                user_files.fetch(s, digest, cache_path(digest))
        except KeyError:
            return f"{setting} {digest} is neither at {job.files[setting + '_file']} here nor stored in the database"
        except (OSError, ValueError) as exc:
            return f"{setting} {digest} could not be fetched from the database: {exc}"
    return None
