"""Entry point of a job's fresh child process: `python -m worker.job.child_main FD`.

Reads the JobSpec as JSON on stdin, runs it, and writes JSON lines to file descriptor FD: progress
events, then one {"event": "result"} line. Anything the engines print goes to stderr, which the
parent keeps the tail of. Peak RSS is this process's own: it ran nothing else.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import threading
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

import psutil

from siliconbench.jobs import JobSpec
from siliconbench.manifest import ModelCatalog
from siliconbench.results import Environment, JobResult, JobStatus

from worker import platform

from worker.measure import roofline
from worker.engines import engine_log, get_engine
from worker.platform.nvidia import DeviceMeter, Nvml
from worker.platform.host_facts import host_facts
from worker.serving.server import kill_live_groups
from worker.workloads import generate, remove_scratch, run_workload


def _rss_peak_bytes() -> int:
    return platform.current().own_peak_rss_bytes()


def _rss_now_bytes() -> int:
    return int(psutil.Process().memory_info().rss)


def _fault(point: str) -> None:
    # Fault injection for the runner's own tests (SILICONBENCH_FAULT=crash|hang|error at load).
    fault = os.environ.get("SILICONBENCH_FAULT", "")
    if point != "load" or not fault:
        return
    if fault == "crash":
        os.abort()
    if fault == "hang":
        time.sleep(10_000)
    if fault == "error":
        raise RuntimeError("injected error (SILICONBENCH_FAULT=error)")


def _die_with_parent() -> None:
    """Exit if the worker that started us dies (kill -9 leaves no one to kill our process group).

    A thread, not the kernel's parent-death signal: a signal's Python handler waits for the engine's native call
    to return (minutes of a long prefill), and SIGKILL would leave the servers a workload started."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                kill_live_groups()  # servers a workload started must not outlive the job either
                remove_scratch()  # nor its folder
                os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def main() -> int:
    # A crash inside an engine (a native fault) still leaves a Python traceback and the engine's last log lines
    # in stderr, whose tail the runner keeps: both go to a copy of fd 2, because llama-cpp-python points fd 2 at
    # /dev/null while a model loads. (stdout is that same file already: the result goes to its own pipe.)
    engine_log.tee_to_stderr()
    faulthandler.enable(file=engine_log.stream(), all_threads=True)
    _die_with_parent()
    out = os.fdopen(int(sys.argv[1]), "w", buffering=1)

    def emit(event: str, **payload) -> None:
        out.write(json.dumps({"event": event, **payload}) + "\n")

    emit("started", pid=os.getpid())
    try:
        return _run(emit)
    except Exception as exc:  # reported to the parent as a failed result, with the traceback on stderr

        traceback.print_exc()
        emit("error", error=f"{type(exc).__name__}: {exc}")
        return 1
    finally:
        out.close()


def _run(emit) -> int:
    job = JobSpec.model_validate_json(sys.stdin.read())
    models_dir = Path(os.environ["SILICONBENCH_MODELS_DIR"])
    nvml = Nvml.open()  # a CUDA host: the job's device memory and the GPU's energy (None elsewhere)
    if job.workload != "generate":  # every other kind runs in worker/workloads/<kind>.py
        meter = DeviceMeter(nvml).start() if nvml else None
        result = run_workload(job, models_dir, emit)
        if meter:
            result.extra["device_memory"] = meter.stop()
        emit("result", result=json.loads(result.model_dump_json()))
        return 0
    started = datetime.now(timezone.utc)
    engine = get_engine(job.engine)
    # Import the engine's modules before the baseline, so baseline = interpreter + engine code.
    engine_module = "llama_cpp" if job.engine == "llama.cpp" else "mlx_lm"
    __import__(engine_module)
    baseline = _rss_now_bytes()
    baseline_footprint = platform.current().phys_footprint(os.getpid())

    path = models_dir / job.artifact
    n_ctx = job.n_depth + job.n_prompt + job.n_gen + 16
    meter = DeviceMeter(nvml).start() if nvml else None
    t0 = time.perf_counter()
    engine.load(path, job.engine_options, n_ctx=n_ctx)
    load_s = time.perf_counter() - t0
    _fault("load")
    emit("loaded", load_s=load_s)

    samples = generate.run(engine, job, on_rep=lambda r, warm: emit("repetition", index=r, warmup=warm),
                           meter=meter)
    desc = engine.describe()
    env = Environment(**host_facts(), **desc)
    ceiling = roofline.bound(ModelCatalog(models_dir).get(job.model), path, job.n_depth, job.n_prompt, job.n_gen,
                             engine.dtypes().get("kv_cache", "f16"), env.chip, env.host_details.get("gpu_cores"),
                             gpu=env.host_details.get("gpu") if env.backend == "CUDA" else None)
    for s in samples:
        if (pct := roofline.bandwidth_pct(s.values["decode_tps"], ceiling)) is not None:
            s.values["decode_bandwidth_pct"] = pct
    roofline.mark_exceeded(ceiling, [s.values.get("decode_bandwidth_pct", 0.0) for s in samples if not s.warmup])
    vocab = engine.vocab_size()
    prompt_digest = generate.prompt_ids_digest(engine, job)
    device = {**meter.stop(), **engine.memory_facts()} if meter else engine.memory_facts()
    engine.close()
    result = JobResult(
        job_id=job.job_id, status=JobStatus.ok, started_at=started, load_s=load_s,
        peak_memory_bytes=_rss_peak_bytes(), baseline_memory_bytes=baseline,
        peak_footprint_bytes=platform.current().lifetime_max_phys_footprint(os.getpid()),
        baseline_footprint_bytes=baseline_footprint, samples=samples,
        environment=env, extra={"n_ctx": n_ctx, "vocab_size": vocab, "prompt_ids_sha256": prompt_digest,
                                "roofline": ceiling, **({"device_memory": device} if device else {})},
    )
    emit("result", result=json.loads(result.model_dump_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
