"""The claim as one more worker sees it while the fleet runs (benchmarks/fleet_scale.py's steady phase): a process of
its own, with the worker's held connection (siliconbench.storage.hot_path), claiming a sweep's jobs one at a time
every ``--every-s`` and writing each result, timing each claim. Apart from the simulated workers, whose own figure
also counts the wait for their process's interpreter lock among 25 workers' threads.

    python -m benchmarks._fleet_probe --database URL --sweep ID --every-s 0.2   (prints one JSON list of ms)
"""

from __future__ import annotations

import argparse
import json
import time

from sqlalchemy import select

from siliconbench.contract.results import JobResult, JobStatus

from siliconbench.storage.database import as_application, hold_no_idle_connections, session_scope
from siliconbench.storage.hot_path import HeldConnection
from siliconbench.storage.tables import Job

NAME = "probe"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--database", required=True)
    ap.add_argument("--sweep", required=True)
    ap.add_argument("--every-s", type=float, default=0.2)
    a = ap.parse_args()
    hold_no_idle_connections()
    url = as_application(a.database, NAME)
    with session_scope(url) as s:
        ids = list(s.scalars(select(Job.id).where(Job.sweep_id == a.sweep).order_by(Job.idx)))
    held, took = HeldConnection(url), []
    for job_id in ids:
        time.sleep(a.every_s)
        t0 = time.perf_counter()
        got = held.claim(job_id, worker=NAME, host=NAME)
        took.append((time.perf_counter() - t0) * 1000)
        assert got is not None and got.job is not None, f"the probe could not claim {job_id}"
        held.save_result(got.job, JobResult(job_id=job_id, status=JobStatus.ok), host=NAME, worker=NAME, durable=False)
    print(json.dumps(took))


if __name__ == "__main__":
    main()
