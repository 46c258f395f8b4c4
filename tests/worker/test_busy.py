"""The busy gate on real jobs and a real CPU-burning process (started, and killed, by its own PID).

A job with nothing else running is not contended; the same job with a burner started once its model loaded is
marked contended (and disturbed: left out of regression verdicts); ``busy: wait`` waits for a busy machine up
to its timeout and says so; ``busy: refuse`` refuses to run.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time

import pytest

from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.spec import parse_sweep

from siliconbench.coordinator.history.load import load_points
from siliconbench.coordinator.reports.tables import _contended
from siliconbench.storage import result_store, sweep_store
from siliconbench.storage.database import session_scope
from siliconbench.worker.job.child import run_in_child
from tests.conftest import SMALL
from tests.workload_helpers import jobs_for, run

pytestmark = pytest.mark.solo  # the busy gate must see this machine quiet, and busy only by the test's own burner

GEN = {"kind": "generate", "prompt_tokens": [64], "gen_tokens": [128], "depth": [0]}
BURN = (
    "import multiprocessing as m\ndef spin():\n    while True: pass\nif __name__ == '__main__':\n"
    "    ps = [m.Process(target=spin) for _ in range(m.cpu_count())]\n    [p.start() for p in ps]\n"
    "    [p.join() for p in ps]\n"
)


@pytest.fixture(autouse=True)
def gate_on(monkeypatch):
    monkeypatch.setenv("SILICONBENCH_BUSY_CPU_PCT", "25")  # conftest turns the CPU test off for the suite


class Burner:
    """One spinning process per core, in its own session: stopped by its PID's group, nothing else."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        if self.proc is None:
            self.proc = subprocess.Popen([sys.executable, "-c", BURN], start_new_session=True)
            time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None


@pytest.fixture
def burner():
    b = Burner()
    yield b
    b.stop()


# One engine thread: beside a spinner on every core, llama.cpp's threads wait on each other at every barrier and run
# ~15x slower (a 5 s test took 20 s); one thread shares its core and runs about half as fast, which is all the gate
# needs to see.
ONE_THREAD = {"threads": 1}


def job(models_dir, engine="llama.cpp", **kw):
    return next(
        j for j in jobs_for(models_dir, GEN, repetitions=3, engine_options=ONE_THREAD, **kw) if j.engine == engine
    )


# The burner starts once the job has (and takes ~0.5 s to spin up), so it must cover most of the job's window,
# whose load and start-up it cannot: 5 repetitions on two threads covered too little and others' share read 22%
# once; 10 (~0.6 s of decoding here) read 17.6% on a faster machine. The loaded job decodes for about LOADED_BODY_S
# at the quiet job's speed, whatever the machine.
LOADED_BODY_S = 3.0


def sweep_of(models_dir, name: str, repetitions: int = 10):
    spec = parse_sweep(
        {
            "name": name,
            "models": [SMALL],
            "repetitions": repetitions,
            "warmup": 0,
            "workloads": [GEN],
            "engines": ["llama.cpp"],
            "busy": "record",
            "engine_options": ONE_THREAD,
        }
    )
    return spec, expand(spec, ModelCatalog(models_dir))[0]


def test_a_job_beside_a_cpu_burner_is_contended_and_a_quiet_one_is_not(models_dir, burner, sqlite_url):
    calm_spec, calm_job = sweep_of(models_dir, "calm")
    quiet_res = run_in_child(calm_job, models_dir)
    assert quiet_res.status == "ok", quiet_res.error
    quiet_s = quiet_res.extra["busy"]["during"]["seconds"]
    decode_s = GEN["gen_tokens"][0] / quiet_res.summary("decode_tps").median  # one repetition's decode
    busy_spec, busy_job = sweep_of(models_dir, "loaded", max(10, math.ceil(LOADED_BODY_S / decode_s)))

    def on_event(e):  # the burner starts once the child runs: during the job, not before it
        if e["event"] == "started":
            burner.start()

    busy_res = run_in_child(busy_job, models_dir, on_event=on_event)
    burner.stop()
    assert quiet_res.status == busy_res.status == "ok", (quiet_res.error, busy_res.error)
    calm, load = quiet_res.extra["busy"], busy_res.extra["busy"]
    print(
        f"\nquiet job: others {calm['during']['others_cpu_pct']}% of the cores, decode "
        f"{quiet_res.summary('decode_tps').median:.1f} tok/s; beside the burner: others "
        f"{load['during']['others_cpu_pct']}%, decode {busy_res.summary('decode_tps').median:.1f} tok/s"
        f" (windows {quiet_s:.2f} s and {load['during']['seconds']:.2f} s)"
    )
    assert (
        not calm["contended"]
        and calm["during"]["others_cpu_pct"] < 25
        and quiet_res.disturbed is False
        and quiet_res.contended is False
    )
    assert (
        load["contended"]
        and load["during"]["others_cpu_pct"] > 25
        and busy_res.disturbed is True
        and busy_res.throttled is not True
    )
    assert any("other processes used" in w for w in load["why"])
    assert _contended({"extra": busy_res.extra}) and not _contended({"extra": quiet_res.extra})
    # stored, the contended result is marked (results.disturbed) and left out of regression verdicts unless asked
    with session_scope(sqlite_url) as s:
        for spec, jb, res in ((calm_spec, calm_job, quiet_res), (busy_spec, busy_job, busy_res)):
            sweep_store.create_sweep(s, jb.sweep_id, spec, [jb])
            result_store.save_result(s, jb, res, host="here", worker="embedded")
    with session_scope(sqlite_url) as s:
        assert [p.sweep_name for p in load_points(s)] == ["calm"]
        assert sorted(p.sweep_name for p in load_points(s, include_disturbed=True)) == ["calm", "loaded"]


def test_busy_wait_waits_up_to_its_timeout_and_says_so(models_dir, burner):
    burner.start()
    t0 = time.monotonic()
    res, _ = run(job(models_dir, busy="wait", busy_timeout_s=3), models_dir)
    burner.stop()
    rec = res.extra["busy"]
    assert rec["timed_out"] and rec["waited_s"] >= 3 and time.monotonic() - t0 >= 3
    assert rec["start"]["busy"] and rec["contended"]


def test_busy_refuse_does_not_run_on_a_busy_machine(models_dir, burner):
    burner.start()
    res, events = run(job(models_dir, busy="refuse"), models_dir)
    burner.stop()
    assert res.status == "failed" and res.error.startswith("busy: refuse") and "other processes used" in res.error
    assert not events  # no child was started
