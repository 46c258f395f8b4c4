"""Run one job in a fresh child process: JSON over a pipe, a hard timeout, crashes become results.

A fresh process per job gives each job a clean memory baseline and its own peak RSS, and means a
crashing engine cannot take the worker down (pyperf's `_manager.py` does the same per benchmark).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import psutil

from siliconbench.contract.engines import describe
from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.results import JobResult, failed

from siliconbench import import_root
from siliconbench.worker.envs.blas import child_blas_env, inherited_preload
from siliconbench.worker.envs.builds import child_vars
from siliconbench.worker.measure import busy, gate, roofline, thermal

STDERR_TAIL_CHARS = 4000


def _tail(f: IO[bytes]) -> str:
    f.seek(0, os.SEEK_END)
    f.seek(max(0, f.tell() - STDERR_TAIL_CHARS))
    return f.read().decode(errors="replace")


def child_env(job: JobSpec, models_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["SILICONBENCH_MODELS_DIR"] = str(models_dir)
    env["PYTHONUNBUFFERED"] = "1"
    # The child must import this checkout's packages even when run under another interpreter.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (import_root(), env.get("PYTHONPATH", "")) if p)
    env["LD_PRELOAD"] = inherited_preload()  # no BLAS but the one child_blas_env chooses
    env.pop("SILICONBENCH_LLAMA_BUILD", None)  # only a job on a llama.cpp build runs on one
    env.update(child_vars(job.engine, job.engine_version))
    if describe(job.engine).preloads_blas:
        env.update(child_blas_env(job.engine_options.get("blas", "auto"), job.engine_options.get("threads")))
    return env


def _kill_spawned(groups: list[dict]) -> None:
    """SIGKILL the process groups a job announced (its servers) that outlived the job's own process."""
    for g in groups:
        try:
            if abs(psutil.Process(g["pgid"]).create_time() - g["create_time"]) > 0.5:
                continue  # the id belongs to another process now
        except psutil.NoSuchProcess:
            pass  # leader gone; members of its group may not be (Linux never reuses a live group's id)
        try:
            os.killpg(g["pgid"], signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_in_child(
    job: JobSpec,
    models_dir: Path,
    *,
    python: str | None = None,
    timeout_s: float | None = None,
    on_event: Callable[[dict], None] | None = None,
    read_thermal: Callable[[], dict] | None = None,
) -> JobResult:
    """Run ``job`` in a new process of ``python`` (default: this interpreter) and return its result, behind
    the job's gates (siliconbench/worker/measure/gate.py; their records in ``extra["thermal"]`` and ``extra["busy"]``).

    Never raises for a failure of the job itself: a crash, a timeout, an engine error or a garbled
    reply all come back as a failed JobResult carrying the reason and the child's stderr tail.
    """
    try:
        heat = thermal.before_job(job, read_thermal)
    except gate.GateRefused as exc:
        return failed(
            job.job_id,
            str(exc),
            started_at=datetime.now(UTC),
            extra={"thermal": {"mode": job.thermal, "refused": True}},
        )
    try:
        load = busy.before_job(job)
    except gate.GateRefused as exc:
        return failed(
            job.job_id,
            str(exc),
            started_at=datetime.now(UTC),
            extra={"busy": {"mode": job.busy, "refused": True}},
        )
    if job.workload == "generate":
        roofline.probed_gbs()  # cached a day; measured here, never in the job's own process
    result = _spawn_child(job, models_dir, python=python, timeout_s=timeout_s, on_event=on_event)
    result.extra["thermal"] = thermal.after_job(heat, read_thermal)
    result.extra["busy"] = busy.after_job(load)
    if job.model_notes:  # e.g. a tokenizer mismatch `models add` was told to allow: on every result
        result.extra["model_notes"] = job.model_notes
    return result


def _spawn_child(
    job: JobSpec,
    models_dir: Path,
    *,
    python: str | None,
    timeout_s: float | None,
    on_event: Callable[[dict], None] | None,
) -> JobResult:
    timeout_s = timeout_s or job.timeout_s
    started = datetime.now(UTC)
    try:
        env = child_env(job, models_dir)
    except FileNotFoundError as exc:
        return failed(job.job_id, f"engine error: {exc}", started_at=started)
    read_fd, write_fd = os.pipe()
    lines: list[dict] = []
    spawned: list[dict] = []  # process groups the job started (servers), killed if the job dies first
    scratch: list[str] = []  # the job's folder, removed here if the job dies before it could
    # The child's output, for the tail a failed result carries: a file without a name, so that nothing is left
    # behind when this process is killed (a named one was, at every kill -9 of a worker mid-job).
    err = tempfile.TemporaryFile("w+b")
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(
            [python or sys.executable, "-m", "siliconbench.worker.job.child_main", str(write_fd)],
            stdin=subprocess.PIPE,
            stdout=err,
            stderr=err,
            pass_fds=(write_fd,),
            env=env,
            start_new_session=True,  # its own group: kill takes all of it
        )
        os.close(write_fd)

        def reader() -> None:
            with os.fdopen(read_fd, "r") as pipe:
                for line in pipe:
                    try:
                        event = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    lines.append(event)
                    if event.get("event") == "spawned":
                        spawned.append(event)
                    if event.get("event") == "scratch":
                        scratch.append(event["path"])
                    if on_event and event.get("event") != "result":
                        on_event(event)

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        proc.stdin.write(job.model_dump_json().encode())
        proc.stdin.close()
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            thread.join(5)
            return failed(
                job.job_id,
                f"timeout: the job ran past its limit of {timeout_s:g} s and was killed",
                _tail(err),
                started_at=started,
                wall_s=time.perf_counter() - t0,
            )
        thread.join(10)
        wall_s = time.perf_counter() - t0
        result_events = [e for e in lines if e.get("event") == "result"]
        if rc == 0 and result_events:
            res = JobResult.model_validate(result_events[-1]["result"])
            res.wall_s = wall_s
            return res
        errors = [e["error"] for e in lines if e.get("event") == "error"]
        if errors:
            reason = f"engine error: {errors[-1]}"
        elif rc < 0:
            reason = f"crash: the child process died of signal {signal.Signals(-rc).name}"
        else:
            reason = f"crash: the child process exited with status {rc} and no result"
        return failed(job.job_id, reason, _tail(err), started_at=started, wall_s=wall_s)
    finally:
        _kill_spawned(spawned)
        for folder in scratch:
            shutil.rmtree(folder, ignore_errors=True)
        err.close()
