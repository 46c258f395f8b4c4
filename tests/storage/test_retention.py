"""Retention (siliconbench.storage.retention, `siliconbench db prune`): old raw samples go once their summaries are stored;
results, summaries, a finding's evidence and the dashboard's and history's numbers stay. SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from siliconbench.coordinator.history.load import load_points
from siliconbench.coordinator.reads import queries
from siliconbench.storage import database as db
from siliconbench.storage.retention import prune_samples
from siliconbench.storage.tables import Finding, Job, Result, ResultSummary, SampleRow, utcnow
from tests.dashboard_seed import seed

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def url(empty_db):
    return empty_db


def counts(url: str) -> dict:
    with db.session_scope(url) as s:
        return {
            t.__tablename__: s.scalar(select(func.count()).select_from(t)) for t in (Result, ResultSummary, SampleRow)
        }


def add_finding(url: str, before: str, after: str, confirm_sweep: str) -> None:
    with db.session_scope(url) as s:
        s.add(
            Finding(
                key="k",
                series_id="s",
                series="s",
                series_key={},
                metric="prefill_tps",
                verdict="regression",
                engine="llama.cpp",
                model="m",
                before_job_id=before,
                after_job_id=after,
                before={},
                after={},
                changes={},
                comparison={},
                status="confirming",
                confirm_sweep_id=confirm_sweep,
            )
        )


def test_prune_keeps_results_summaries_evidence_and_the_numbers(url):
    seeded = seed(url)
    with db.session_scope(url) as s:
        first = list(s.scalars(select(Job.id).where(Job.sweep_id == seeded["sweeps"][0], Job.status == "ok")))
        series_before = queries.series(s)
        centers_before = {(p.job_id, m): p.center(m) for p in load_points(s) for m in ("prefill_tps", "decode_tps")}
    add_finding(url, first[0], first[1], confirm_sweep=seeded["sweeps"][1])
    before = counts(url)
    with db.session_scope(url) as s:  # nothing is old enough yet
        assert prune_samples(s, keep_days=30) == 0
    with db.session_scope(url) as s:
        deleted = prune_samples(s, keep_days=30, now=utcnow() + timedelta(days=31))
    after = counts(url)
    assert deleted > 0 and after["samples"] == before["samples"] - deleted
    assert after["results"] == before["results"] and after["result_summaries"] == before["result_summaries"]
    with db.session_scope(url) as s:
        kept = set(s.scalars(select(SampleRow.job_id).distinct()))
        confirm = set(s.scalars(select(Job.id).where(Job.sweep_id == seeded["sweeps"][1], Job.status == "ok")))
        assert kept == {first[0], first[1]} | confirm  # the evidence only; the third sweep's samples are gone
        assert queries.series(s) == series_before  # the dashboard reads summaries: the same numbers
        centers_after = {(p.job_id, m): p.center(m) for p in load_points(s) for m in ("prefill_tps", "decode_tps")}
    assert centers_after == pytest.approx(centers_before)  # history: a pruned result keeps its median


def test_cli_prune_follows_the_setting(url, tmp_path):
    seed(url)
    env = {**os.environ, "SILICONBENCH_DATABASE_URL": url, "XDG_DATA_HOME": str(tmp_path / "xdg")}
    env.pop("SILICONBENCH_KEEP_SAMPLES_DAYS", None)

    def run(*a, **e):
        return subprocess.run(
            [sys.executable, "-m", "siliconbench.cli.main", "db", "prune", *a],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**env, **e},
            timeout=120,
        )

    out = run()
    assert out.returncode == 0 and "SILICONBENCH_KEEP_SAMPLES_DAYS is unset" in out.stdout, out.stderr
    out = run(SILICONBENCH_KEEP_SAMPLES_DAYS="30")
    assert out.returncode == 0 and "deleted 0 raw samples" in out.stdout, out.stderr
    out = run("--days", "0")
    assert out.returncode == 0 and "deleted 0 raw samples" not in out.stdout, out.stdout + out.stderr
    assert counts(url)["samples"] == 0
    out = run(SILICONBENCH_KEEP_SAMPLES_DAYS="-1")
    assert out.returncode != 0 and "SILICONBENCH_KEEP_SAMPLES_DAYS" in out.stdout + out.stderr
