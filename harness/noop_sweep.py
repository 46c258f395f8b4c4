"""A sweep of no-op jobs (benchmarks/plumbing.py's): every step of a job except the engine — stored as `submit` stores a
sweep, enqueued to one queue every worker consumes, run by real workers (their claim, lease and result write).
"""

from __future__ import annotations

import uuid

from siliconbench.contract.jobs import JobSpec, digest
from siliconbench.contract.spec import parse_sweep

from siliconbench.storage import broker, database, jobstate, sweep_store

NOOP_QUEUE = "cap.noop"  # workers consume it through SILICONBENCH_WORKER_EXTRA_QUEUES


def store_and_enqueue(database_url: str, broker_url: str, jobs: int, queue: str = NOOP_QUEUE) -> str:
    """Store ``jobs`` no-op jobs as one sweep, mark them enqueued, send their messages; returns the sweep id."""
    sweep_id = f"noop-{uuid.uuid4().hex[:6]}"
    template = dict(
        sweep_id=sweep_id, sweep_name="noop", model="noop", engine="llama.cpp", quant="none", quant_level="full",
        artifact="none", model_sha256="", workload="noop", n_gen=0, n_depth=0, repetitions=0, warmup=0, delay_s=0,
        seed=0, timeout_s=60, engine_options={},
    )  # fmt: skip
    specs = []
    for i in range(jobs):
        j = JobSpec(job_id="", index=i, n_prompt=i + 1, **template)
        j.job_id = digest({"sweep": sweep_id, **j.key()})
        specs.append(j)
    with database.session_scope(database_url) as s:
        sweep_store.create_sweep(s, sweep_id, parse_sweep({"name": "noop", "models": ["noop"]}), specs)
        s.flush()
        jobstate.mark_enqueued(s, [j.job_id for j in specs], {j.job_id: queue for j in specs})
    broker.enqueue(broker_url, [(j.job_id, queue, 0) for j in specs])
    return sweep_id
