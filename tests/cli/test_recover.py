"""Nothing left half-done by a restart: `siliconbench run` killed with -9 mid-sweep (by the PID this test
started), then the next embedded start on this host applies the sweep's on_interrupt. Real engines, SQLite."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from harness.fleet import ROOT, wait_for
from siliconbench.embedded.recover import recover
from siliconbench.embedded.run import run_jobs
from siliconbench.storage import database as db
from siliconbench.worker.envs.venvs import interpreters
from tests.cli_support import write_sweep


def statuses(path) -> list[str]:
    con = sqlite3.connect(path)
    try:
        return [r[0] for r in con.execute("select status from jobs order by idx")]
    except sqlite3.OperationalError:  # the file exists before the run has made its tables
        return []
    finally:
        con.close()


def interrupted_run(tmp_path, policy: str) -> tuple[str, object]:
    path = tmp_path / "sb.sqlite"
    sweep = write_sweep(tmp_path, repetitions=3, delay_s=1.0, on_interrupt=policy)  # two jobs, a few s each
    proc = subprocess.Popen(
        [sys.executable, "-m", "siliconbench.cli.main", "run", str(sweep)],
        cwd=ROOT,
        env={**os.environ, "SILICONBENCH_DATABASE_URL": f"sqlite:///{path}"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: path.exists() and "running" in statuses(path), 120, what="the first job to start")
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # the dashboard or the CLI dies mid-sweep
        proc.wait()
    assert "running" in statuses(path) and "queued" in statuses(path)
    return f"sqlite:///{path}", path


@pytest.mark.parametrize("policy", ["fail", "rerun"])
def test_an_interrupted_embedded_sweep_is_finished_by_the_next_start(tmp_path, isolated_env, policy):
    url, path = interrupted_run(tmp_path, policy)
    found = recover(url)
    assert [(r.policy, len(r.jobs)) for r in found] == [(policy, 2)]
    if policy == "fail":
        con = sqlite3.connect(path)
        errors = [r[0] for r in con.execute("select error from results order by job_id")]
        con.close()
        assert statuses(path) == ["failed", "failed"]
        assert all(e.startswith("interrupted: the process that ran this embedded sweep (embedded ") for e in errors)
    else:
        assert statuses(path) == ["queued", "queued"]
        r = found[0]
        run_jobs(r.sweep_id, r.jobs, interpreters(r.jobs), database_url=url, models_dir=isolated_env["models_dir"])
        assert statuses(path) == ["ok", "ok"]
    assert recover(url) == []  # nothing is orphaned twice
    db.dispose(url)
