"""Confirm across the fleet: a finding's A/B/A/B confirmation run by a real worker, on its own
least-privilege login, chosen by name or by SKU, and a clear error for a worker that does not exist."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from siliconbench.contract.errors import UserError

from harness.fleet import ROOT
from siliconbench.coordinator.confirm.on_fleet import attach_confirm, choose_hosts
from siliconbench.coordinator.fleet import sweeps as fleet
from siliconbench.coordinator.fleet.peers import sku_of
from siliconbench.coordinator.history.load import load_points
from siliconbench.coordinator.history.regressions import find_steps, list_findings, save_findings
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import Job, Result
from tests.envs_support import OTHER_MLX_LM, mlx_env
from tests.history_seed import seed_results

NAME = "cf-1"
OWN_MLX_LM = "0.32.2"


@pytest.fixture(scope="session")
def other_mlx():
    return mlx_env()


def sb(*args, env: dict):
    return subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )


def finding_on(url: str, models_dir: Path, host: str) -> int:
    """mlx-lm 0.31.3 x4 then 0.32.2 x4 with decode 12% slower, measured on ``host``: one finding."""
    runs = [
        {"mlx_lm": v, "day": i, "host": host, "medians": {"decode_tps": 400.0 * (0.88 if v == OWN_MLX_LM else 1.0)}}
        for i, v in enumerate([OTHER_MLX_LM] * 4 + [OWN_MLX_LM] * 4)
    ]
    seed_results(url, models_dir, runs, sweep="nightly")
    with session_scope(url) as s:
        steps = save_findings(s, find_steps(load_points(s), metrics=("decode_tps",)))
    assert len(steps) == 1
    return steps[0].finding_id


def test_confirm_runs_on_a_chosen_worker_and_attaches_its_comparison(
    models_dir,
    other_mlx,
    pg_url,
    broker_url,  # noqa: F811
    workers,
    tmp_path,
):
    fid = finding_on(pg_url, models_dir, NAME)
    workers(NAME, models_dir, env={"SILICONBENCH_ENVS_DIR": str(Path(other_mlx.path).parent)})
    env = {
        "SILICONBENCH_DATABASE_URL": pg_url,
        "SILICONBENCH_BROKER_URL": broker_url,
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
    }

    out = sb("confirm", str(fid), "--host", "nope", env=env)
    assert out.returncode == 2 and "--host" in out.stderr and "no registered worker named 'nope'" in out.stderr
    assert NAME in out.stderr  # the valid choices
    out = sb("confirm", str(fid), "--sku", "Apple M9 Ultra", env=env)
    assert out.returncode == 2 and "--sku" in out.stderr and "no online worker has SKU" in out.stderr
    with session_scope(pg_url) as s:
        assert list_findings(s)[0]["status"] == "open"  # nothing was enqueued
        view = next(h for h in fleet.host_views(s) if h.name == NAME)
        assert choose_hosts(s, sku=sku_of(view)) == [NAME]
        with pytest.raises(UserError):
            choose_hosts(s)

    out = sb("confirm", str(fid), "--host", NAME, "--rounds", "4", "--repetitions", "3", env=env)
    assert out.returncode == 0, out.stderr + out.stdout
    assert f"finding {fid}" in out.stdout and f"on {NAME}" in out.stdout and "done" in out.stdout
    with session_scope(pg_url) as s:
        f = list_findings(s)[0]
        rows = s.query(Job.id, Job.target_host, Job.worker, Job.status, Job.error)
        rows = rows.filter(Job.sweep_id == f["confirm_sweep_id"]).all()
        pts = sorted(load_points(s, f["confirm_sweep_id"]), key=lambda p: p.when)
    assert f["status"] in ("confirmed", "not_confirmed", "inconclusive")
    r = f["confirm_result"]
    assert r["host"] == NAME and r["baseline"] == OTHER_MLX_LM and r["candidate"] == OWN_MLX_LM and r["rounds"] == 4
    # Every job is compared or counted as disturbed (a job the hypervisor stole >10% of the cores from is contended:
    # once, in a loaded make test, the candidate side counted 3 processes and the fourth was read as failed).
    said = (r, [(j.id, j.status, j.error) for j in rows], [(p.engine_version, sorted(p.samples)) for p in pts])
    assert r["failed_jobs"] == 0 and r["n_baseline"] + r["n_candidate"] + r["disturbed_jobs"] == 8, said
    assert r["samples_baseline"] == 3 * r["n_baseline"] and r["samples_candidate"] == 3 * r["n_candidate"], said
    assert r["p_value"] is not None and r["verdict"] in ("regression", "equivalent", "inconclusive", "improvement")
    assert {(j.target_host, j.worker, j.status) for j in rows} == {
        (NAME, NAME, "ok")
    }  # pinned to the worker, run by it
    # Interleaved A/B/A/B on the worker, each side under the interpreter its own environments give it.
    assert [p.components["mlx-lm"] for p in pts] == [OTHER_MLX_LM, OWN_MLX_LM] * 4

    # A result that ran disturbed (contended, throttled) is left out of the comparison and counted as such, not as
    # a failed job: attached again after one candidate result is marked so.
    with session_scope(pg_url) as s:
        clean = select(Result).join(Job, Job.id == Result.job_id).where(Job.sweep_id == r["sweep_id"])
        one = s.scalars(clean.where(Result.disturbed.is_not(True))).first()
        one.extra = {**one.extra, "busy": {**(one.extra.get("busy") or {}), "contended": True}}  # as the gate says it
        one.disturbed = True
    again = attach_confirm(pg_url, fid)["confirm_result"]
    assert again["failed_jobs"] == 0 and again["disturbed_jobs"] == r["disturbed_jobs"] + 1, again
    assert again["n_baseline"] + again["n_candidate"] == r["n_baseline"] + r["n_candidate"] - 1
