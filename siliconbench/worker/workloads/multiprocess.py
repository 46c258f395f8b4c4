"""The multiprocess workload: K engine processes on one host, each with the model loaded, decoding at once.

On a Mac both engines' GPU work from several processes is serialized on one command queue; on a CPU
the processes share the cores. The job's process starts K copies of this module (``python -m
siliconbench.worker.workloads.multiprocess``, in its own process group, so the runner's kill takes them too) and
drives them over stdin/stdout in lock step: all prefill (untimed), then all decode on one signal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from siliconbench.contract.errors import WorkloadError
from siliconbench.contract.workloads import CTX_SLACK

from siliconbench.worker.engines import get_engine
from siliconbench.worker.measure import pagecache
from siliconbench.worker.measure.memory import footprint_of, pss_of, rss_of
from siliconbench.worker.workloads.common import Context, Outcome, SampleLog, done, engine_for, repetitions
from siliconbench.worker.workloads.timing import rep_seed, synthetic_tokens


class Proc:
    """One engine process and its line protocol."""

    def __init__(self, ctx: Context, i: int, config: dict):
        self.log_path = ctx.workdir / f"engine-{i}.log"
        with open(self.log_path, "wb") as log:
            self.p = subprocess.Popen(
                [sys.executable, "-m", __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                bufsize=1,
            )
        self.send(config)

    def send(self, msg: dict) -> None:
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()

    def recv(self) -> dict:
        line = self.p.stdout.readline()
        if not line:
            self.p.wait()
            tail = self.log_path.read_text(errors="replace")[-600:]
            raise WorkloadError(f"engine process {self.p.pid} exited with status {self.p.returncode}: {tail.strip()}")
        return json.loads(line)

    def close(self) -> None:
        try:
            self.send({"cmd": "exit"})
            self.p.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()


def run(ctx: Context) -> Outcome:
    job, k = ctx.job, ctx.job.params["processes"]
    config = {
        "engine": job.engine,
        "artifact": str(ctx.artifact),
        "options": job.engine_options,
        "n_ctx": job.n_prompt + job.n_gen + CTX_SLACK,
        "n_prompt": job.n_prompt,
        "n_gen": job.n_gen,
    }
    procs: list[Proc] = []
    log = SampleLog()
    try:
        procs = [Proc(ctx, i, config) for i in range(k)]  # all load at once, as K servers starting together would
        hello = [pr.recv() for pr in procs]
        loads = [h["load_s"] for h in hello]
        ctx.emit("loaded", load_s=max(loads))
        pids = [pr.p.pid for pr in procs]
        ctx.emit("processes", pids=pids)  # in this job's process group: the runner's kill takes them too
        for r, warm in repetitions(ctx):
            for i, pr in enumerate(procs):  # a different prompt per process and repetition
                pr.send({"cmd": "prefill", "seed": rep_seed(job, r) * 64 + i})
            for pr in procs:
                pr.recv()
            for pr in procs:
                pr.send({"cmd": "decode"})
            spans = [pr.recv() for pr in procs]
            total_rss, total_pss, footprint = rss_of(pids), pss_of(pids), footprint_of(pids)
            if footprint is not None:  # clean mapped model pages are in no footprint: counted once, here
                footprint += pagecache.resident_bytes(ctx.artifact)
            for s in spans:
                log.add({"mp_process_decode_tps": job.n_gen / (s["t1"] - s["t0"])}, warmup=warm)
            wall = max(s["t1"] for s in spans) - min(s["t0"] for s in spans)
            log.add(
                {
                    "mp_aggregate_decode_tps": k * job.n_gen / wall,
                    "mp_total_rss_bytes": total_rss,
                    "mp_total_pss_bytes": total_pss,
                    "mp_total_footprint_bytes": footprint,
                },
                warmup=warm,
            )
            done(ctx, r, warm)
    finally:
        for pr in procs:
            pr.close()
    extra = {
        "processes": k,
        "load_s_per_process": loads,
        "n_ctx": config["n_ctx"],
        "effective_options": hello[0]["options"],
    }  # threads as the engine resolved them, in each process
    return Outcome(samples=log.samples, engine=engine_for(job), extra=extra, load_s=max(loads), own_peak=False)


def _engine_process() -> int:
    """One engine process: load, then prefill / decode on command; timestamps on a clock all processes share."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # engine chatter goes to the log, never into the protocol
    config = json.loads(sys.stdin.readline())
    engine = get_engine(config["engine"])
    t = time.perf_counter()
    engine.load(Path(config["artifact"]), config["options"], n_ctx=config["n_ctx"])
    load_s = time.perf_counter() - t
    proto.write(json.dumps({"load_s": load_s, "options": getattr(engine, "options", {})}, default=str) + "\n")
    vocab, avoid = engine.vocab_size(), engine.special_token_ids()
    first = 0
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["cmd"] == "prefill":
            engine.reset()
            first = engine.first_token(engine.prefill(synthetic_tokens(vocab, avoid, config["n_prompt"], msg["seed"])))
            proto.write("{}\n")
        elif msg["cmd"] == "decode":
            t0 = time.monotonic()  # CLOCK_MONOTONIC / mach_absolute_time: one clock for every process of the host
            engine.decode(first, config["n_gen"])
            proto.write(json.dumps({"t0": t0, "t1": time.monotonic()}) + "\n")
        else:
            break
    engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(_engine_process())
