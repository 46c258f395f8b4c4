"""Peers decide what is real (siliconbench.coordinator.fleet.peers, siliconbench.coordinator.fleet.suspects): SKUs, the fleet verdict, suspect hosts.

Statistics on seeded histories (numpy RNG, per-process spread ~4% as measured on these machines, a 1% host
offset for silicon lottery), repeated over many seeds for the detection and false-flag rates; then two real
workers, one slowed by a real busy-wait inside llama.cpp's timed calls (harness/throttle), and the Fleet page.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from harness.peer_scenario import scenario
from siliconbench.coordinator.fleet.peers import (
    clear_suspects,
    confirmed_verdict,
    fleet_verdict,
    list_suspects,
    save_suspects,
    sku_of,
)
from siliconbench.coordinator.fleet.placement import HostView
from siliconbench.coordinator.fleet.suspects import peer_tests, series_level, suspect_hosts
from siliconbench.coordinator.history.points import Point
from siliconbench.coordinator.stats.sequential import Decision
from siliconbench.coordinator.stats.significance import Comparison, Verdict
from siliconbench.storage import database as db
from siliconbench.storage.tables import Host
from tests.peer_seed import SKUS, history


def flagged(data, skus=SKUS) -> set[str]:
    return {t.host for t in suspect_hosts(data, skus, "decode_tps")}


# ---------------------------------------------------------------------------------------------- SKUs


def test_sku_of_host_rows_views_and_dicts():
    mac = {"model": "Mac16,11", "performance_cores": 10, "efficiency_cores": 4, "gpu_cores": 20}
    row = Host(
        name="m1",
        chip="Apple M4 Pro",
        memory_bytes=64 * 2**30,
        os="macOS 15.3.1 (24D70)",
        info={"cores": 14, "host_details": mac},
    )
    view = HostView(name="m2", chip="Apple M4 Pro", memory_bytes=64 * 2**30, os="macOS 15.4 (24E248)", details=mac)
    assert sku_of(row) == sku_of(view) == sku_of(view.as_dict()) == "Apple M4 Pro · 14 CPU · 20 GPU · 64 GiB · macOS 15"
    binned = HostView(
        name="m3",
        chip="Apple M4 Pro",
        memory_bytes=64 * 2**30,
        os="macOS 15.3.1 (24D70)",
        details={**mac, "performance_cores": 8, "gpu_cores": 16},
    )
    newer_os = HostView(name="m4", chip="Apple M4 Pro", memory_bytes=64 * 2**30, os="macOS 26.0 (25A354)", details=mac)
    assert len({sku_of(view), sku_of(binned), sku_of(newer_os)}) == 3
    linux = Host(
        name="l",
        chip="AMD EPYC 7B13",
        memory_bytes=int(23.4 * 2**30),
        os="Debian GNU/Linux 12 (bookworm) (kernel 6.1.0)",
        info={"cores": 2, "host_details": {"physical_cores": 1}},
    )
    assert sku_of(linux) == "AMD EPYC 7B13 · 1 CPU · 23 GiB · Debian GNU/Linux 12"


# ------------------------------------------------------------------------------------- fleet verdict


def comp(verdict: Verdict) -> Comparison:
    ratio = {Verdict.regression: 0.9, Verdict.improvement: 1.1}.get(verdict, 1.0)
    return Comparison(
        "decode_tps",
        "tok/s",
        "higher",
        15,
        15,
        75,
        75,
        100.0,
        100.0 * ratio,
        ratio,
        ratio - 0.02,
        ratio + 0.02,
        0.001 if ratio != 1.0 else 0.5,
        verdict,
        (ratio - 1) * 100,
    )


R, I, N, X = Verdict.regression, Verdict.improvement, Verdict.equivalent, Verdict.inconclusive  # noqa: E741 (a table's letters)
TWO_A = {"a1": "A", "a2": "A", "b1": "B"}


@pytest.mark.parametrize(
    "per_host, expected",
    [
        ({"a1": R, "a2": R, "b1": N}, "regression"),  # replicated on two hosts of one SKU
        ({"a1": I, "a2": I}, "improvement"),
        ({"a1": R, "a2": N, "b1": N}, "inconsistent"),  # one of two
        ({"a1": R, "a2": I}, "inconsistent"),
        ({"a1": N, "a2": N, "b1": R}, "needs_confirmation"),  # single-host SKU
        ({"a1": N, "a2": N, "b1": N}, "equivalent"),
        ({"a1": X, "a2": X}, "inconclusive"),
        ({"a1": N, "a2": N, "b1": X}, "inconclusive"),  # a release is equivalent only where every SKU says so
        ({"a1": R, "a2": X, "b1": N}, "needs_confirmation"),  # one decided host in A
        ({"a1": R, "a2": R, "b1": I}, "regression"),  # a replicated regression on one SKU wins
    ],
)
def test_fleet_verdict(per_host, expected):
    verdict, detail = fleet_verdict({h: comp(v) for h, v in per_host.items()}, TWO_A)
    assert verdict == expected, detail
    if expected == "needs_confirmation":
        assert detail["confirm"] and all(per_host[h] == R for h in detail["confirm"])


def test_fleet_verdict_majority_suspects_decisions_and_confirmation():
    three = {"a1": "A", "a2": "A", "a3": "A"}
    assert fleet_verdict({"a1": comp(R), "a2": comp(R), "a3": comp(N)}, three)[0] == "regression"  # 2 of 3
    five = {f"a{i}": "A" for i in range(5)}
    assert (
        fleet_verdict({"a0": comp(R), "a1": comp(R), **{f"a{i}": comp(N) for i in (2, 3, 4)}}, five)[0]
        == "inconsistent"
    )  # 2 of 5: not a majority
    # a suspect host's disagreement is left out: its peer's regression alone needs confirmation
    v, d = fleet_verdict({"a1": comp(R), "a2": comp(N)}, TWO_A, suspects={"a2"})
    assert (v, d["excluded"], d["confirm"]) == ("needs_confirmation", ["a2"], ["a1"])
    undecided = Decision(Verdict.inconclusive, 5, 1, False, comp(R))
    assert fleet_verdict({"a1": comp(R), "a2": undecided}, TWO_A)[0] == "needs_confirmation"
    decided = {h: Decision(R, 8, 2, True, comp(R)) for h in ("a1", "a2")}
    assert fleet_verdict(decided, TWO_A)[0] == "regression"
    # the interleaved rerun decides a single host's change
    assert fleet_verdict({"b1": comp(R)}, TWO_A, confirmations={"b1": comp(R)})[0] == "regression"
    assert fleet_verdict({"b1": comp(R)}, TWO_A, confirmations={"b1": comp(N)})[0] == "equivalent"
    assert confirmed_verdict(comp(R), comp(I)) == "inconsistent"
    assert confirmed_verdict(comp(R), comp(X)) == "inconclusive"  # the rerun ended: unconfirmed, never "no change"
    assert confirmed_verdict(comp(R), Decision(X, 5, 1, False, comp(X))) == "needs_confirmation"  # still running


# ------------------------------------------------------------------------------ suspects: statistics


def test_series_level_controls_a_majority_of_tests():
    assert series_level(1, 0.0025) == pytest.approx(0.0025)
    assert series_level(2, 0.0025) == pytest.approx(0.05)
    q = series_level(3, 0.0025)
    assert 3 * q**2 * (1 - q) + q**3 == pytest.approx(0.0025)


def test_slow_host_flagged_healthy_not():
    data = history(0, slow={"a3": 0.08})
    rows = suspect_hosts(data, SKUS, "decode_tps")
    assert {r.host for r in rows} == {"a3"} and len(rows) == 3  # every tested series of it, so all its results
    assert all(r.ratio < 0.95 and r.ci_high < 1 and r.peers == ["a1", "a2", "a4"] and r.sku == "A" for r in rows)
    assert "slower than its 3 SKU peer(s)" in rows[0].reason
    assert not any(t.host == "b1" for t in peer_tests(data, SKUS, "decode_tps"))  # no peers: never tested


def test_rates_over_seeds():
    """200 seeded campaigns of 3 series: a host 8% slow is caught in >= 95%; healthy hosts are flagged in under
    1% of (host, campaign) pairs, with and without a slow peer (the bound alpha / hosts is 0.25%)."""
    seeds = range(200)
    with_slow = [flagged(history(s, slow={"a3": 0.08})) for s in seeds]  # each campaign judged once
    caught = sum("a3" in hits for hits in with_slow)
    false_with_slow = sum(len(hits - {"a3"}) for hits in with_slow)
    false_null = sum(len(flagged(history(1000 + s))) for s in seeds)
    assert caught / 200 >= 0.95, caught
    assert false_with_slow / (200 * 4) < 0.01 and false_null / (200 * 4) < 0.01, (false_with_slow, false_null)


def test_two_hosts_of_an_sku_only_the_slower_is_flagged():
    skus = {"x": "A", "y": "A"}
    hits = [flagged(history(s, slow={"y": 0.10}, hosts=("x", "y")), skus) for s in range(50)]
    assert all(h <= {"y"} for h in hits) and sum("y" in h for h in hits) >= 45


def test_one_disturbed_series_is_not_enough():
    data = history(3)
    for procs in data["s0"]["a2"]:  # a busy spell during one series only
        procs[:] = [v * 0.85 for v in procs]
    assert "a2" not in flagged(data)
    assert "a2" in flagged({"s0": data["s0"]})  # alone, that series is evidence


def rounds_history(
    seed: int,
    slow: dict[str, float] | None = None,
    rounds: int = 8,
    series: int = 3,
    shared_cv: float = 0.20,
    own_cv: float = 0.03,
    hosts=("a1", "a2"),
) -> list[Point]:
    """Points of ``rounds`` sweeps, each placed on every host at once: a round's load (spread ``shared_cv``, as
    two workers sharing this machine's 2 cores see) falls on all hosts alike, their own noise is ``own_cv``."""
    rng = np.random.default_rng(seed)
    out = []
    for r in range(rounds):
        for s in range(series):
            load = 1 + rng.normal(0, shared_cv)
            for h in hosts:
                v = 300.0 * (1 + s) * load * (1 - (slow or {}).get(h, 0.0)) * (1 + rng.normal(0, own_cv))
                p = point(f"{h}-r{r}-s{s}", h, "0.3.36", list(v * (1 + rng.normal(0, own_cv / 3, 3))))
                p.sweep_id, p.n_gen, p.when = f"round-{r}", 64 * (1 + s), datetime(2026, 12, 1, r, tzinfo=UTC)
                out.append(p)
    return out


def test_rounds_pair_the_processes_that_ran_together():
    """A shared load of ±20% a round hides a 9% slower host from the unpaired test; paired by round it is caught,
    in >= 90% of 100 seeds, and the healthy host is never flagged (nor either, with no slow host)."""
    skus = {"a1": "A", "a2": "A"}
    caught = unpaired = false = 0
    for seed in range(100):
        pts = rounds_history(seed, slow={"a2": 0.09})
        tests = peer_tests(pts, skus, "decode_tps")
        assert all(t.paired and t.n_host == 8 for t in tests) and len(tests) == 6
        caught += "a2" in flagged(pts, skus)
        false += "a1" in flagged(pts, skus) or bool(flagged(rounds_history(1000 + seed), skus))
        for p in pts:  # the same processes, each alone in its sweep: no rounds to pair, so Mann-Whitney
            p.sweep_id = p.job_id
        unpaired += "a2" in flagged(pts, skus)
    assert caught >= 90 and false == 0 and unpaired < 50, (caught, false, unpaired)
    slow = [t for t in suspect_hosts(rounds_history(0, slow={"a2": 0.09}), skus, "decode_tps")][0]
    assert "paired by round" in slow.reason and slow.ci_low < slow.ratio < slow.ci_high < 1


def point(job_id: str, host: str, version: str, values: list[float]) -> Point:
    return Point(
        job_id,
        "sw",
        "sw",
        host,
        "llama.cpp",
        "tiny",
        "F16",
        "full",
        "generate",
        32,
        64,
        0,
        "ab" * 32,
        {"threads": 1},
        {},
        {"llama-cpp-python": version},
        datetime(2026, 12, 1, tzinfo=UTC),
        {"decode_tps": values},
    )


def test_points_group_by_version_and_carry_job_ids():
    rng = np.random.default_rng(7)
    pts = [
        point(
            f"{h}-{v}-{i}",
            h,
            v,
            list(300 * (0.85 if h == "a3" and v == "0.3.36" else 1.0) * (1 + rng.normal(0, 0.03, 3))),
        )
        for h in ("a1", "a2", "a3")
        for v in ("0.3.35", "0.3.36")
        for i in range(6)
    ]
    tests = peer_tests(pts, SKUS, "decode_tps")
    assert len({t.series_id for t in tests}) == 2 and all(t.series.endswith(("0.3.35", "0.3.36")) for t in tests)
    slow = [t for t in tests if t.host == "a3" and t.series.endswith("0.3.36")][0]
    assert slow.job_ids == [f"a3-0.3.36-{i}" for i in range(6)] and slow.ratio < 0.9
    assert flagged(pts) == set()  # slow in one of its two series (one version): not a majority


# ------------------------------------------------------------------------------------ suspects: storage


def test_save_is_idempotent_and_clear(sqlite_url):
    rows = suspect_hosts(history(0, slow={"a3": 0.08}), SKUS, "decode_tps")
    with db.session_scope(sqlite_url) as s:
        assert save_suspects(s, rows) == 3
        assert save_suspects(s, rows) == 0
        assert save_suspects(s, rows[:1], campaign_id=None) == 0
    with db.session_scope(sqlite_url) as s:
        got = list_suspects(s)
        assert len(got) == 3 and {r["host"] for r in got} == {"a3"} and got[0]["peers"] == ["a1", "a2", "a4"]
        assert clear_suspects(s, "a3") == 3
    with db.session_scope(sqlite_url) as s:
        assert list_suspects(s) == [] and len(list_suspects(s, active_only=False)) == 3
        save_suspects(s, rows)  # seen again: a cleared row stays cleared
    with db.session_scope(sqlite_url) as s:
        assert list_suspects(s) == []


# ------------------------------------------------------------------------------------- real workers


@pytest.mark.solo  # each worker is pinned to a core of its own, which other tests would share
def test_real_workers_throttled_one_is_flagged(models_dir, tmp_path):
    """Two real workers, one half as fast inside llama.cpp's timed calls: 3 decode series x 8 rounds, each round
    one sweep on both, so the test pairs the rounds' processes. This test proves the path (workers, rounds,
    pairing, flagging), not the sensitivity: benchmarks/suspect_hosts.py measures detection rates over repeated
    runs (a 10% throttle caught in 18 of 20 on a quiet machine, 8 of 20 on a noisier one). With 6-8 rounds the
    paired test needs nearly every round to agree, and two workers sharing this 2-core machine vary by 20-25%
    per process: a 20% throttle was missed in CI and a 37.5% one once here (ratios 0.75-0.8, one round
    reversed), so the throttle is gross on purpose, as in test_watch_loop."""
    # Short generations: the throttle halves every timed call whatever its length, and each round costs mostly
    # its three processes' start (the scenario's default lengths, for measuring sensitivity, are 4x longer).
    # Eight rounds: the signed-rank p is then 1/256 with every round agreeing and at most 7/256 with one of the four
    # closest rounds reversed, under the per-series level for two hosts (0.041, suspects.series_level). Six rounds
    # failed once in a make test here: one close round reversed gave p = 3/64 (tg128 at 0.72).
    r = scenario(models_dir, tmp_path, throttle=1.0, processes=8, gen=(32, 64, 128))
    assert sum(c.get("ok", 0) for c in r["progress"].values()) == 48, r["progress"]
    assert len(set(r["skus"].values())) == 1  # one machine: the same facts, the same SKU
    assert r["flagged"] == [r["throttled"]], [(t.host, t.series, t.ratio, t.p_value) for t in r["tests"]]
    slow = [t for t in r["tests"] if t.host == r["throttled"]]
    assert len(slow) == 3 and all(t.paired and t.n_host == 8 for t in slow)
    assert sum(0.35 < t.ratio < 0.7 for t in slow) >= 2  # about the throttle's 1 / 2
