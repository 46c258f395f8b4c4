"""benchmarks/faults.py, the fault campaign, in a short version: real workers, Redis, reconcile loop and dashboard
killed by PID and PostgreSQL cut on a seeded schedule while a real sweep runs; nothing may be lost, duplicated or
left behind, and every service must still serve afterwards."""

from __future__ import annotations

import json
import random
import subprocess
import sys

from harness.fault_schedule import schedule
from harness.fleet import ROOT

SHORT = [
    "--jobs",
    "12",
    "--worker-kills",
    "3",
    "--broker-restarts",
    "1",
    "--db-cut-s",
    "5",
    "--reconciler-kills",
    "1",
    "--seed",
    "1",
    "--window-s",
    "40",
    "--timeout-s",
    "240",
]


def test_the_schedule_is_seeded_and_keeps_the_cut_inside_the_window():
    kw = dict(worker_kills=20, broker_restarts=1, db_cut_s=60, reconciler_kills=2, window_s=300)
    events = schedule(random.Random(7), **kw)
    assert events == schedule(random.Random(7), **kw) and events != schedule(random.Random(8), **kw)
    kinds = [what for _, what, _ in events]
    assert kinds.count("kill worker") == 20 and kinds.count("kill broker") == 1 and kinds.count("kill reconciler") == 2
    (cut,), (restore,) = (
        [t for t, w, _ in events if w == "cut database"],
        [t for t, w, _ in events if w == "restore database"],
    )
    assert restore - cut == 60 and restore <= 300 and events == sorted(events)


def test_a_short_campaign_loses_duplicates_and_leaves_nothing(tmp_path):
    out = tmp_path / "faults.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/faults.py", *SHORT, "--json", str(out), "--work-dir", str(tmp_path / "work")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    f = json.loads(out.read_text())
    assert f["jobs"] == 12 and f["ok"] == 12 and f["failed"] == [] and f["sweep_finished"]
    assert f["lost"] == f["duplicated"] == f["incomplete"] == f["left_behind"] == f["died_by_themselves"] == []
    assert {k: f["faults"][k] for k in ("kill worker", "kill broker", "kill reconciler", "cut database")} == {
        "kill worker": 3,
        "kill broker": 1,
        "kill reconciler": 1,
        "cut database": 1,
    }
    assert f["serving"] == {"workers": True, "reconciler": True, "dashboard": True}
    assert "jobs lost" in proc.stdout and "serving afterwards: dashboard" in proc.stdout
