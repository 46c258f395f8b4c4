"""Shared by the workload tests: expand one workload on the tiny model, run a job, check no process is left."""

from __future__ import annotations

import os
import time

import psutil

from siliconbench.contract.jobs import JobSpec, expand
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.spec import parse_sweep

from siliconbench.worker.job.child import run_in_child
from tests.conftest import SMALL


def jobs_for(models_dir, workload: dict, **kw) -> list[JobSpec]:
    data = {"name": "wl", "models": [SMALL], "repetitions": 2, "warmup": 0, "workloads": [workload], "timeout_s": 300}
    return expand(parse_sweep({**data, **kw}), ModelCatalog(models_dir))


def run(job: JobSpec, models_dir, **kw):
    """(result, events) of one job in a fresh child process."""
    events: list[dict] = []
    return run_in_child(job, models_dir, on_event=events.append, **kw), events


def assert_no_process_left(events: list[dict]) -> None:
    """Every server group and engine process the job announced is gone (only those: others run here too)."""
    groups = [(e["pgid"], e["create_time"]) for e in events if e["event"] == "spawned"]
    pids = [p for e in events if e["event"] == "processes" for p in e["pids"]]
    pids += [e["pid"] for e in events if e["event"] == "started"]
    deadline = time.monotonic() + 5
    for pgid, _created in groups:
        while True:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                break
            assert time.monotonic() < deadline, f"server process group {pgid} outlived its job"
            time.sleep(0.05)
    for pid in pids:
        while True:
            try:
                alive = psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                break
            if not alive:
                break
            assert time.monotonic() < deadline, f"process {pid} outlived its job"
            time.sleep(0.05)


def values(res, metric: str) -> list[float]:
    return res.measured(metric)
