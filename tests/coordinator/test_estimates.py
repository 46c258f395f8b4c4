"""The Sweeps page's duration estimate (siliconbench.coordinator.reads.estimates) on SQLite (UNION ALL) and PostgreSQL (LATERAL):
the newest results of the same configuration, else the same model and engine scaled by tokens."""

from __future__ import annotations

import pytest

from siliconbench.coordinator.reads import estimates, queries
from siliconbench.storage import database as db
from tests.dashboard_seed import job, seed


@pytest.fixture
def url(empty_db):
    seed(empty_db)
    return empty_db


def test_estimate_from_the_same_configuration_then_by_tokens(url):
    same = job("plan", 0, "llama.cpp", 128)  # measured 3 times: wall 4 s, 5 s (studio), 4 s (mbp), 3 repetitions
    scaled = job("plan", 1, "llama.cpp", 256)  # never measured at 256 tokens: llama.cpp's seconds per token
    other = job("plan", 2, "llama.cpp", 128).model_copy(update={"model": "never-run"})
    with db.session_scope(url) as s:
        est = queries.estimate_duration(s, [same, scaled, other])
    per_rep = (4 / 3 + 5 / 3 + 4 / 3) / 3
    # llama.cpp results: p128 x3 (4, 5, 4 s) and p512 x3 (4, 5, 4 s), 3 repetitions, 32 generated tokens
    per_token = sum(w / 3 / (p + 32) for p in (128, 512) for w in (4.0, 5.0, 4.0)) / 6
    assert est["unknown_jobs"] == 1 and est["jobs"] == 3
    assert est["total_s"] == pytest.approx(3 * per_rep + 3 * per_token * (256 + 32))
    assert est["per_host_s"] == {"any": pytest.approx(est["total_s"])}


def test_estimate_reads_only_the_newest_results(url, monkeypatch):
    monkeypatch.setattr(estimates, "RECENT", 1)  # the newest: the mbp sweep's (seeded last), wall 4 s
    with db.session_scope(url) as s:
        est = queries.estimate_duration(s, [job("plan", 0, "llama.cpp", 128)])
    assert est["total_s"] == pytest.approx(4.0)
