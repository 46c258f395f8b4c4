"""Verdicts reach people: the outbox delivered to a real local HTTP receiver that is down first, then failing,
then up (time driven through ``now``), signed, exactly once, nothing lost; idempotent queueing; no secret, no
send; two deliverers at once on PostgreSQL; `siliconbench regressions --since`; the Regressions page."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from siliconbench.contract.errors import UserError

from siliconbench.coordinator.watch.messages import message, parse_since
from siliconbench.coordinator.watch.notify import (
    NO_SECRET,
    SECRET_VAR,
    deliver_due,
    queue_notification,
    verify_signature,
)
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import Finding, utcnow
from siliconbench.storage.watch_tables import Notification
from tests.page_support import run_page
from tests.webhook_receiver import SECRET, Receiver

ROOT = Path(__file__).resolve().parents[2]
FINDING = {
    "watch": "nightly",
    "campaign_id": 7,
    "package": "llama-cpp-python",
    "engine": "llama.cpp",
    "baseline": "0.3.36",
    "candidate": "0.3.37",
    "series": "tiny-llama-5m Q4_K_M p512 g128 d0",
    "metric": "decode_tps",
    "verdict": "regression",
    "ratio": 0.912,
    "ci_low": 0.881,
    "ci_high": 0.944,
    "p_value": 0.0031,
    "hosts": ["mini-01", "mini-02"],
    "sku": "M4 16GB",
    "command": "siliconbench compare -b version=0.3.36 -c version=0.3.37 -m decode_tps",
}
SUSPECT = {
    "host": "mini-03",
    "sku": "M4 16GB",
    "series": FINDING["series"],
    "metric": "decode_tps",
    "ratio": 0.81,
    "ci_low": 0.77,
    "ci_high": 0.85,
    "peers": ["mini-01", "mini-02"],
    "campaign_id": 7,
    "command": "siliconbench compare -b host=mini-01 -c host=mini-03",
}


@pytest.fixture
def secret(monkeypatch):
    monkeypatch.setenv(SECRET_VAR, SECRET)


def row(url: str, nid: int) -> Notification:
    with session_scope(url) as s:
        return s.get(Notification, nid)


def queue(url: str, key: str, payload: dict, kind: str = "finding", hook: str | None = None) -> int | None:
    with session_scope(url) as s:
        n = queue_notification(s, kind=kind, key=key, payload=payload, url=hook)
        return n.id if n else None


def test_down_then_failing_then_up_is_delivered_once_signed(empty_db, secret):
    held = socket.socket()  # the port reserved but not listening: connections are refused
    held.bind(("127.0.0.1", 0))
    port = held.getsockname()[1]
    nid = queue(empty_db, "campaign-7/decode", FINDING, hook=f"http://127.0.0.1:{port}/hook")
    t0 = utcnow()
    out = deliver_due(empty_db, now=t0, timeout_s=2)
    n = row(empty_db, nid)
    assert out["failed"] == 1 and n.attempts == 1 and n.delivered_at is None and "refused" in n.last_error.lower()
    assert n.next_attempt_at == t0 + timedelta(seconds=5)
    assert deliver_due(empty_db, now=t0 + timedelta(seconds=4))["failed"] == 0  # backing off: not due yet
    held.close()
    rx = Receiver(port=port, fail_first=2)
    try:
        assert deliver_due(empty_db, now=t0 + timedelta(seconds=5))["failed"] == 1
        n = row(empty_db, nid)
        assert n.attempts == 2 and n.last_error.startswith("HTTP 503") and "busy" in n.last_error
        assert n.next_attempt_at == t0 + timedelta(seconds=15)  # 5 s, then 10 s
        assert deliver_due(empty_db, now=t0 + timedelta(seconds=15))["failed"] == 1
        assert row(empty_db, nid).next_attempt_at == t0 + timedelta(seconds=35)
        out = deliver_due(empty_db, now=t0 + timedelta(seconds=35))
        assert out["delivered_ids"] == [nid]
        assert deliver_due(empty_db, now=t0 + timedelta(days=1))["delivered"] == 0  # never sent twice
    finally:
        rx.close()
    n = row(empty_db, nid)
    assert n.attempts == 4 and n.delivered_at == t0 + timedelta(seconds=35) and n.last_error is None
    assert len(rx.requests) == 3 and list(rx.accepted) == [str(nid)] and len(rx.accepted[str(nid)]) == 1
    headers, body = rx.requests[-1]
    assert headers["Content-Type"] == "application/json" and verify_signature(
        SECRET, body, headers["X-Siliconbench-Signature"]
    )
    assert not verify_signature(SECRET, body + b" ", headers["X-Siliconbench-Signature"])
    assert not verify_signature("other", body, headers["X-Siliconbench-Signature"])
    doc = json.loads(body)
    assert {k: doc[k] for k in FINDING} == FINDING
    assert (doc["id"], doc["kind"], doc["key"]) == (nid, "finding", "campaign-7/decode")
    assert doc["message"] == message(FINDING, "finding")


def test_queueing_is_idempotent_by_key(empty_db):
    assert queue(empty_db, "k1", FINDING) is not None
    assert queue(empty_db, "k1", {**FINDING, "ratio": 0.5}) is None
    with session_scope(empty_db) as s:  # twice in one transaction too
        assert queue_notification(s, kind="suspect_host", key="k2", payload=SUSPECT) is not None
        assert queue_notification(s, kind="suspect_host", key="k2", payload=SUSPECT) is None
    with session_scope(empty_db) as s:
        rows = {n.key: n for n in s.scalars(select(Notification))}
    assert set(rows) == {"k1", "k2"} and rows["k1"].payload["ratio"] == 0.912
    with pytest.raises(ValueError), session_scope(empty_db) as s:
        queue_notification(s, kind="gossip", key="k3", payload={})


def test_without_the_secret_nothing_is_sent(empty_db, monkeypatch):
    monkeypatch.delenv(SECRET_VAR, raising=False)
    rx = Receiver()
    try:
        nid = queue(empty_db, "k", SUSPECT, kind="suspect_host", hook=rx.url)
        queue(empty_db, "no-hook", FINDING)  # no url: dashboard and CLI only, never posted
        assert deliver_due(empty_db)["refused"] == 1
        n = row(empty_db, nid)
        assert rx.requests == [] and n.last_error == NO_SECRET and n.attempts == 0 and n.delivered_at is None
        monkeypatch.setenv(SECRET_VAR, SECRET)
        assert deliver_due(empty_db)["delivered_ids"] == [nid] and list(rx.accepted) == [str(nid)]
    finally:
        rx.close()


def test_two_deliverers_at_once_never_send_the_same_row(empty_db, secret):
    if not empty_db.startswith("postgresql"):
        pytest.skip("SQLite: one deliverer process; SKIP LOCKED is PostgreSQL's")
    rx = Receiver(delay_s=0.05)
    try:
        ids = [queue(empty_db, f"k{i}", {**SUSPECT, "host": f"mini-{i}"}, "suspect_host", rx.url) for i in range(12)]
        outs = []
        threads = [threading.Thread(target=lambda: outs.append(deliver_due(empty_db))) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        rx.close()
    assert sorted(i for o in outs for i in o["delivered_ids"]) == ids
    assert all(o["delivered"] for o in outs)  # both really worked, side by side
    assert len(rx.requests) == 12 and sorted(map(int, rx.accepted)) == ids


def test_message_says_versions_series_ratio_ci_hosts_and_command():
    m = message(FINDING)
    for part in (
        "Regression",
        "llama-cpp-python 0.3.36 → 0.3.37",
        FINDING["series"],
        "decode_tps",
        "0.912×",
        "95% CI 0.881–0.944",
        "mini-01, mini-02",
        "M4 16GB",
        "Reproduce: " + FINDING["command"],
    ):
        assert part in m, (part, m)
    s = message(SUSPECT)
    for part in ("Suspect host mini-03", "0.810×", "2 SKU peers", "95% CI 0.770–0.850", SUSPECT["command"]):
        assert part in s, (part, s)
    assert "boom" in message({"watch": "w", "campaign_id": 1, "error": "boom"}, "campaign_failed")


def test_parse_since():
    now = utcnow()
    assert parse_since("24h", now) == now - timedelta(hours=24) and parse_since("7d", now) == now - timedelta(days=7)
    assert parse_since("2026-12-01").isoformat() == "2026-12-01T00:00:00+00:00"
    assert parse_since("2026-12-01T08:00+01:00").isoformat() == "2026-12-01T08:00:00+01:00"
    with pytest.raises(UserError) as e:
        parse_since("yesterday")
    assert e.value.field == "--since"


def seed_verdicts(url: str) -> None:
    queue(url, "f", FINDING)
    queue(url, "s", SUSPECT, kind="suspect_host", hook="http://127.0.0.1:9/hook")
    old = queue(url, "old", {**FINDING, "candidate": "0.3.30"})
    with session_scope(url) as s:
        s.get(Notification, old).created_at = utcnow() - timedelta(days=10)
        s.add(
            Finding(
                key="step",
                series_id="sid",
                series="tiny mlx f32 p64",
                series_key={},
                metric="prefill_tps",
                verdict="regression",
                host="mini-01",
                engine="mlx",
                model="tiny",
                before_job_id="a",
                after_job_id="b",
                before={},
                after={},
                changes={"mlx-lm": ["0.30.7", "0.31.3"]},
                ratio=0.9,
                p_value=0.01,
                comparison={},
            )
        )


def sb(*args, url: str):
    return subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "SILICONBENCH_DATABASE_URL": url},
        timeout=120,
    )


def test_regressions_since_lists_the_verdicts(empty_db):
    seed_verdicts(empty_db)
    out = sb("regressions", "--since", "24h", "--format", "json", url=empty_db)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert sorted((r["source"], r["kind"]) for r in rows) == [
        ("finding", "regression"),
        ("notification", "finding"),
        ("notification", "suspect_host"),
    ]
    got = {r["kind"]: r for r in rows}
    assert got["finding"]["message"] == message(FINDING) and got["finding"]["delivery"] == "no webhook"
    assert got["suspect_host"]["delivery"] == "pending" and "confirm" in got["regression"]["message"]
    out = sb("regressions", "--since", "2020-01-01", "--format", "json", url=empty_db)
    assert out.returncode == 0 and len(json.loads(out.stdout)) == 4
    out = sb("regressions", "--since", "24h", url=empty_db)
    assert out.returncode == 0 and "Suspect host mini-03" in out.stdout and "pending" in out.stdout
    bad = sb("regressions", "--since", "yesterday", url=empty_db)
    assert bad.returncode == 2 and "--since" in bad.stderr and "yesterday" in bad.stderr
    with session_scope(empty_db) as s:
        assert s.scalar(select(func.count()).select_from(Finding)) == 1  # --since lists, it never searches


def test_regressions_page_lists_campaign_verdicts(sqlite_url, tmp_path, monkeypatch):
    seed_verdicts(sqlite_url)
    at = run_page("regressions", sqlite_url, monkeypatch, tmp_path)
    df = next(d.value for d in at.dataframe if "webhook" in d.value.columns)
    assert list(df["kind"]) == ["suspect_host", "finding", "finding"]  # newest first, the old one too
    assert list(df["webhook"]) == ["pending, 0 tries", "no webhook", "no webhook"]
    assert "Suspect host mini-03" in df["message"][0] and df["message"][1] == message(FINDING)
