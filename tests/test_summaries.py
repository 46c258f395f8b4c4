"""Migration 0007 backfills the per-result summaries (and results.engine_version) of results stored before it:
a database seeded, taken down to 0006 (no summaries, no column), and upgraded holds exactly what
siliconbench.aggregate.summarize says over each result's measured samples. SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from siliconbench.aggregate import summarize

from storage import database as db, store
from storage.summaries import RESULT_METRICS
from storage.tables import Result, ResultIdentity, ResultSummary

from .dashboard_seed import seed, seed_results


@pytest.fixture
def url(empty_db):
    return empty_db


def test_upgrade_from_0006_backfills_summaries_equal_to_summarize(url):
    seed(url)
    seed_results(url, [[1.0, 2.0], [3.0]])  # a single sample: variance 0
    with db.session_scope(url) as s:
        written = {(r.job_id, r.metric): (r.n, r.mean, r.median, r.var, r.min, r.max)
                   for r in s.scalars(select(ResultSummary))}
    db.downgrade(url, "0006")
    db.upgrade(url)
    with db.session_scope(url) as s:
        backfilled = {(r.job_id, r.metric): r for r in s.scalars(select(ResultSummary))}
        versions = dict(s.execute(select(Result.job_id, Result.engine_version)).all())
        identities = dict(s.execute(select(ResultIdentity.identity_hash, ResultIdentity.job_id)).all())
        stored = store.load_stored(s)
    want = {}
    for x in stored:
        for m in {m for smp in x.result.samples for m in smp.values}:
            if (w := x.result.summary(m)) is not None:
                want[(x.job.job_id, m)] = w
        for m in RESULT_METRICS:  # the results row's one-value metrics: summaries of one value
            if getattr(x.result, m) is not None:
                want[(x.job.job_id, m)] = summarize([getattr(x.result, m)])
    assert set(backfilled) == set(want) == set(written) and len(want) > 30
    for key, w in want.items():
        got = backfilled[key]
        assert (got.n, got.median, got.min, got.max) == (w.count, w.median, w.min, w.max), key
        assert got.mean == pytest.approx(w.mean, rel=1e-12) and got.var == pytest.approx(w.stddev ** 2, rel=1e-12)
        assert (got.n, got.mean, got.median, got.var, got.min, got.max) == pytest.approx(written[key], rel=1e-12)
    ok = {x.result.identity_hash(x.job): set() for x in stored if x.result.status == "ok"}
    for x in stored:
        if x.result.status == "ok":
            ok[x.result.identity_hash(x.job)].add(x.job.job_id)
    assert set(identities) == set(ok) and all(identities[k] in ok[k] for k in ok)  # one ok result of each
    for x in stored:  # the engine version, read once from the environment JSON
        assert versions[x.job.job_id] == (x.result.environment.engine_version(x.job.engine)
                                          if x.result.environment else None)
    assert {v for v in versions.values()} >= {"0.3.35", "0.3.36", "0.32.2"}
