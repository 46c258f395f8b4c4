"""Results the worker could not write yet, kept on its disk until the database is back.

One JSON file per job (written to a temporary name, then renamed, so a crash never leaves half a
file); flushing is idempotent because store.save_result writes a job's result at most once.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from sqlalchemy.exc import ProgrammingError

from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.results import JobResult

from siliconbench.storage.database import session_scope
from siliconbench.storage.result_store import save_result
from siliconbench.storage.roles import refused_by_rules

log = logging.getLogger(__name__)


class Spool:
    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)

    def put(self, job: JobSpec, result: JobResult, host: str, worker: str) -> Path:
        path = self.dir / f"{job.job_id}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "job": job.model_dump(mode="json"),
                    "result": json.loads(result.model_dump_json()),
                    "host": host,
                    "worker": worker,
                }
            )
        )
        os.replace(tmp, path)
        log.warning("database unreachable: result of job %s kept in %s", job.job_id, path)
        return path

    def pending(self) -> list[Path]:
        return sorted(self.dir.glob("*.json"))

    def flush(self, database_url: str) -> int:
        """Write every spooled result; returns how many were flushed. Raises if the database is down."""
        n = 0
        for path in self.pending():
            data = json.loads(path.read_text())
            try:
                with session_scope(database_url) as s:
                    save_result(
                        s,
                        JobSpec.model_validate(data["job"]),
                        JobResult.model_validate(data["result"]),
                        host=data["host"],
                        worker=data["worker"],
                    )
            except ProgrammingError as exc:
                if not refused_by_rules(exc):
                    raise
                # The job went to another worker while the database was away; that worker records it.
                log.warning("spooled result of job %s dropped: the job is no longer this worker's", path.stem)
            path.unlink()
            n += 1
        if n:
            log.info("flushed %d spooled result(s) to the database", n)
        return n
