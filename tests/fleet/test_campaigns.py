"""A campaign's preparing state on the real PostgreSQL and Redis, the worker's side played by its own storage calls
(report_env, the host's advertised engines): which versions are sent to which host queue and in which order, a
host that runs both already, failures as the campaign's error, and a campaign with no ready host failed and
announced. The whole loop with real workers is tests/fleet/test_watch_loop.py."""

from __future__ import annotations

import numpy as np
from sqlalchemy import update

from siliconbench.coordinator.stats.sequential import LOOKS
from siliconbench.coordinator.watch.campaigns.looks import Series, decisions
from siliconbench.coordinator.watch.campaigns.state import advance, advance_all
from siliconbench.coordinator.watch.campaigns.verdicts import needing_confirmation, series_verdict
from siliconbench.storage import database
from siliconbench.storage.campaign_hosts import env_reports, report_env
from siliconbench.storage.tables import Host, utcnow
from siliconbench.storage.watch_tables import Campaign, Notification, Watch
from tests.fleet.support import prepare_tasks as sent

WEBHOOK = "http://127.0.0.1:9/hook"


def seed(url: str, hosts: dict[str, str]) -> int:
    """A watch, hosts advertising these mlx versions, and a preparing campaign 0.31.3 -> 0.32.2 on them."""
    with database.session_scope(url) as s:
        s.add(
            Watch(
                name="w",
                spec={
                    "name": "w",
                    "packages": ["mlx-lm"],
                    "every": "1h",
                    "index": "/srv/wheels",
                    "notify": {"webhook": WEBHOOK},
                    "processes": 15,
                    "suite": {"name": "s", "models": ["tiny-llama-5m"], "engines": ["mlx"]},
                },
            )
        )
        for name, versions in hosts.items():
            s.add(
                Host(
                    name=name,
                    chip="Test chip",
                    memory_bytes=16 * 2**30,
                    os="Linux 6",
                    online=True,
                    last_heartbeat=utcnow(),
                    engines=[{"name": "mlx", "version": versions}],
                    models=[],
                )
            )
        s.flush()
        c = Campaign(
            watch="w",
            package="mlx-lm",
            engine="mlx",
            baseline="0.31.3",
            candidate="0.32.2",
            hosts=sorted(hosts) + ["ghost"],
            sweep_ids=[],
            verdicts={"baseline_reason": "seeded"},
        )
        s.add(c)
        s.flush()
        return c.id


def advertise(url: str, host: str, versions: str) -> None:
    with database.session_scope(url) as s:
        s.execute(update(Host).where(Host.name == host).values(engines=[{"name": "mlx", "version": versions}]))


def campaign(url: str, cid: int) -> Campaign:
    with database.session_scope(url) as s:
        return s.get(Campaign, cid)


def test_each_host_prepares_what_it_lacks_one_version_at_a_time(pg_url, broker_url):  # noqa: F811
    cid = seed(pg_url, {"has-both": "0.32.2, 0.31.3", "has-none": "0.30.0", "fails": "0.32.2"})
    assert advance(pg_url, broker_url, cid).startswith("preparing: waiting")
    assert sent(broker_url, "has-both") == []  # it runs both already: ready at once, nothing to make
    first = sent(broker_url, "has-none")
    assert [p["requirement"] for p in first] == ["mlx-lm==0.32.2"]  # the candidate first
    assert first[0] == {
        "campaign_id": cid,
        "requirement": "mlx-lm==0.32.2",
        "extra": [],
        "find_links": "/srv/wheels",
        "index_url": None,
    }
    assert [p["requirement"] for p in sent(broker_url, "fails")] == ["mlx-lm==0.31.3"]  # it lacks only the baseline
    with database.session_scope(pg_url) as s:
        rows = env_reports(s, cid)
    assert {h: r["status"] for h, r in rows.items()} == {
        "has-both": "ready",
        "has-none": "pending",
        "fails": "pending",
        "ghost": "failed",
    }

    advance(pg_url, broker_url, cid)  # nobody reported: nothing is sent twice
    assert len(sent(broker_url, "has-none")) == 1 and len(sent(broker_url, "fails")) == 1

    # has-none made the candidate (and advertises it): now the baseline is sent; `fails` cannot install.
    with database.session_scope(pg_url) as s:
        report_env(s, cid, "has-none", status="ready", env_name="mlx-lm-0.32.2", packages={"mlx-lm": "0.32.2"})
        report_env(s, cid, "fails", status="failed", error="pip could not install mlx-lm==0.31.3\nno matching dist")
    advertise(pg_url, "has-none", "0.30.0, 0.32.2")
    assert advance(pg_url, broker_url, cid).startswith("preparing: waiting")
    assert [p["requirement"] for p in sent(broker_url, "has-none")] == ["mlx-lm==0.32.2", "mlx-lm==0.31.3"]

    # The baseline is made too: every host has reported, so look 1 is submitted on the two ready hosts; this
    # fleet has no live worker holding the suite's model, so the fleet refuses it and the campaign says why.
    with database.session_scope(pg_url) as s:
        report_env(s, cid, "has-none", status="ready", env_name="mlx-lm-0.31.3", packages={"mlx-lm": "0.31.3"})
    advertise(pg_url, "has-none", "0.30.0, 0.32.2, 0.31.3")
    line = advance(pg_url, broker_url, cid)
    c = campaign(pg_url, cid)
    assert line.startswith("failed: could not enqueue campaign-") and c.status == "failed", line
    assert c.verdicts["ready"] == ["has-both", "has-none"] and c.verdicts["baseline_reason"] == "seeded"
    hosts = c.verdicts["hosts"]
    assert hosts["fails"]["status"] == "failed" and "pip could not install" in hosts["fails"]["error"]
    assert hosts["has-none"]["sent"] == ["0.32.2", "0.31.3"] and hosts["has-both"]["sent"] == []
    assert "could not enqueue campaign-" in c.error
    assert advance_all(pg_url, broker_url) == {}  # nothing active any more


def test_no_ready_host_fails_the_campaign_and_announces_it(pg_url, broker_url):  # noqa: F811
    cid = seed(pg_url, {"only": "0.32.2"})
    advance(pg_url, broker_url, cid)
    with database.session_scope(pg_url) as s:
        report_env(s, cid, "only", status="failed", error="pip could not install mlx-lm==0.31.3")
    assert advance_all(pg_url, broker_url) == {cid: "failed: no host could prepare mlx-lm 0.32.2"}
    c = campaign(pg_url, cid)
    assert c.status == "failed" and c.error == (
        "only: pip could not install mlx-lm==0.31.3; ghost: no registered worker named ghost"
    )
    with database.session_scope(pg_url) as s:
        (n,) = s.query(Notification).all()
    assert (n.kind, n.key, n.url) == ("campaign_failed", f"campaign {cid}:failed", WEBHOOK)
    assert n.payload["error"] == c.error and n.payload["candidate"] == "0.32.2"
    assert advance(pg_url, broker_url, cid) == "failed"  # a finished campaign is left alone


# ----------------------------------------------------------------- verdicts on seeded processes (no database)


def seeded(hosts: dict[str, float], n: int = 15, seed: int = 0, cv: float = 0.03):
    """A Series of decode tok/s: each host's baseline at 100, its candidate at 100 x ratio, spread by ``cv``."""
    rng = np.random.default_rng(seed)
    s = Series("sid", "mlx tiny g16", "decode_tps")
    for h, ratio in hosts.items():
        s.sides[h] = tuple(
            [list(level * (1 + rng.normal(0, cv)) * (1 + rng.normal(0, cv / 3, 3))) for _ in range(n)]
            for level in (100.0, 100.0 * ratio)
        )
    return s


def test_fleet_verdict_needs_two_hosts_of_a_sku_or_a_confirmation():
    skus = {"a1": "A", "a2": "A", "b1": "B"}
    s = seeded({"a1": 0.8, "a2": 0.8, "b1": 1.0})
    per_host = decisions({("sid", "decode_tps"): s}, list(skus), LOOKS)[("sid", "decode_tps")]
    assert all(d.decided for d in per_host.values()) and per_host["a1"].processes == 5  # decided at the first look
    v = series_verdict(s, per_host, skus, [])
    assert v["verdict"] == "regression" and v["changed_hosts"] == ["a1", "a2"] and v["skus"] == ["A"]
    assert 0.75 < v["ratio"] < 0.85 and v["ci_low"] < v["ratio"] < v["ci_high"] < 1
    # a1 suspect: left out, a2 alone on its SKU needs an interleaved rerun.
    v = series_verdict(s, per_host, skus, ["a1"])
    assert (
        v["verdict"] == "needs_confirmation" and v["detail"]["confirm"] == ["a2"] and v["detail"]["excluded"] == ["a1"]
    )
    assert needing_confirmation({"label": {"decode_tps": v}}) == ["a2"]
    again = {("sid", "decode_tps"): seeded({"a2": 0.8}, seed=1)}
    assert series_verdict(s, per_host, skus, ["a1"], again)["verdict"] == "regression"  # seen again: confirmed
    refuted = {("sid", "decode_tps"): seeded({"a2": 1.0}, seed=2, cv=0.01)}  # its interval inside ±3%: refuted
    v = series_verdict(s, per_host, skus, ["a1"], refuted)
    assert v["detail"]["skus"]["A"]["verdict"] == "equivalent"
    # The release is equivalent only where every SKU says so: B's own A/A decides the rest.
    b_word = per_host["b1"].verdict.value
    assert b_word in ("equivalent", "inconclusive") and v["verdict"] == b_word, v["detail"]
    noisy = {("sid", "decode_tps"): seeded({"a2": 1.0}, seed=2, cv=0.08)}  # could not tell: never "no change"
    v = series_verdict(s, per_host, skus, ["a1"], noisy)
    assert v["detail"]["skus"]["A"]["verdict"] == "inconclusive" and v["verdict"] == "inconclusive"
