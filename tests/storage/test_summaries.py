"""Migration 0007 backfills the per-result summaries (and results.engine_version) of results stored before it:
a database seeded, taken down to 0006 (no summaries, no column), and upgraded holds exactly what
siliconbench.contract.aggregate.summarize says over each result's measured samples. SQLite and PostgreSQL."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from siliconbench.storage import database as db, result_store
from siliconbench.storage.tables import Result, ResultIdentity, ResultSummary
from tests.dashboard_seed import seed, seed_results
from tests.storage.records import expected_summaries


@pytest.fixture
def url(empty_db):
    return empty_db


def test_upgrade_from_0006_backfills_summaries_equal_to_summarize(url):
    seed(url)
    seed_results(url, [[1.0, 2.0], [3.0]])  # a single sample: variance 0
    with db.session_scope(url) as s:
        written = {
            (r.job_id, r.metric): (r.n, r.mean, r.median, r.var, r.min, r.max) for r in s.scalars(select(ResultSummary))
        }
    db.downgrade(url, "0006")
    db.upgrade(url)
    with db.session_scope(url) as s:
        backfilled = {(r.job_id, r.metric): r for r in s.scalars(select(ResultSummary))}
        versions = dict(s.execute(select(Result.job_id, Result.engine_version)).all())
        identities = dict(s.execute(select(ResultIdentity.identity_hash, ResultIdentity.job_id)).all())
        stored = result_store.load_stored(s)
    want = expected_summaries(stored)
    assert set(backfilled) == set(want) == set(written) and len(want) > 30
    for key, w in want.items():
        got = backfilled[key]
        assert (got.n, got.median, got.min, got.max) == (w.count, w.median, w.min, w.max), key
        assert got.mean == pytest.approx(w.mean, rel=1e-12) and got.var == pytest.approx(w.stddev**2, rel=1e-12)
        assert (got.n, got.mean, got.median, got.var, got.min, got.max) == pytest.approx(written[key], rel=1e-12)
    ok = {x.result.identity_hash(x.job): set() for x in stored if x.result.status == "ok"}
    for x in stored:
        if x.result.status == "ok":
            ok[x.result.identity_hash(x.job)].add(x.job.job_id)
    assert set(identities) == set(ok) and all(identities[k] in ok[k] for k in ok)  # one ok result of each
    for x in stored:  # the engine version, read once from the environment JSON
        assert versions[x.job.job_id] == (
            x.result.environment.engine_version(x.job.engine) if x.result.environment else None
        )
    assert {v for v in versions.values()} >= {"0.3.35", "0.3.36", "0.32.2"}


PROJECT = {"siliconbench", "storage", "worker", "coordinator", "embedded", "cli", "dashboard", "migrations"}


def test_migrations_import_no_live_code():
    """A migration carries its SQL and its arithmetic: it imports nothing of the project, whose tables and
    metric lists move on after it is written."""
    for path in sorted((Path(__file__).resolve().parents[2] / "siliconbench" / "migrations" / "versions").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not [n for n in names if n.split(".")[0] in PROJECT], (path.name, names)


def test_0007_upgrades_a_0006_database_after_a_later_column_joined_result_summaries(url):
    """The live table gains a column with a default (what a later migration would add): upgrading a database
    from 0006 still backfills, since 0007's inserts name 0007's columns, not today's table's."""
    seed(url)
    seed_results(url, [[1.0, 2.0], [3.0]])
    with db.session_scope(url) as s:
        written = {
            (r.job_id, r.metric): (r.n, r.mean, r.median, r.var, r.min, r.max) for r in s.scalars(select(ResultSummary))
        }
    db.downgrade(url, "0006")
    db.dispose(url)
    code = (
        "import sqlalchemy as sa\nfrom siliconbench.storage import database as db\nfrom siliconbench.storage.tables import ResultSummary\n"
        "ResultSummary.__table__.append_column(sa.Column('added_later', sa.Integer, default=0))\n"
        f"db.upgrade({str(url)!r})\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    with db.session_scope(url) as s:
        got = {
            (r.job_id, r.metric): (r.n, r.mean, r.median, r.var, r.min, r.max) for r in s.scalars(select(ResultSummary))
        }
    assert set(got) == set(written) and len(got) > 30
    for key, w in written.items():
        assert got[key] == pytest.approx(w, rel=1e-12), key
