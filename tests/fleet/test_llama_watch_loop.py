"""The watch following llama.cpp's tags, the whole loop on real processes: a real llama.cpp history with a planted
slowdown (harness/llama_repo.py) behind a remote that gains the tag b4, a Mac's checkout that fetches it, two real
workers that build b1 and b4 from that checkout (the prepare task; builds from the kept builds folder), a real
`siliconbench scheduler` (Celery beat ticking every 2 s) running the campaign look by look, the regression it
confirms on both hosts, and the bisection the scheduler then starts on one of them: each midpoint built there,
measured between both ends through each build's llama-bench, until it names the planted commit.

The planted slowdown sleeps 5 ms before every CPU graph (harness/llama_repo.PLANTED_SLEEP_MS): decode tens of times
slower, gross on purpose; the statistics' power is benchmarks/regression_power.py's."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import timedelta

import pytest
from sqlalchemy import select

from siliconbench.contract.watch_spec import parse_watch

from harness.fleet import CliProc, wait_for
from harness.llama_repo import BUILDS, SUBJECTS, make_repo, shas
from siliconbench.coordinator.watch import watches
from siliconbench.coordinator.watch.messages import message
from siliconbench.storage import database
from siliconbench.storage.tables import Finding, Job, Result
from siliconbench.storage.watch_tables import Bisection, Campaign, Notification, Watch, WatchCheck
from tests.cli_support import sb

pytestmark = pytest.mark.timeout(3000)
HOSTS = ["tags-a", "tags-b"]
SUITE = {
    "name": "llama-tags",
    "models": ["tiny-llama-5m"],
    "engines": ["llama.cpp"],
    "quantizations": ["Q8_0"],
    "repetitions": 3,
    "engine_options": {"threads": 1},  # two workers share this machine's two cores
    "workloads": [{"kind": "generate", "prompt_tokens": [16], "gen_tokens": [16], "depth": [0]}],
}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout.strip()


def first(url: str, table):
    with database.session_scope(url) as s:
        return s.scalars(select(table)).first()


def checks(url: str) -> int:
    with database.session_scope(url) as s:
        return len(s.scalars(select(WatchCheck.id)).all())


def ended(url: str, table):
    row = first(url, table)
    return row if row is not None and row.status in ("done", "failed") else None


# Two workers, a scheduler and the builds load both cores for two minutes: beside it, a test in the parallel part that
# times its own processes reads that load as a change (a no-regression bisection read 0.41x once). Alone, it is only
# its own jobs' load, which the interleaving shares between sides.
@pytest.mark.solo
def test_a_regressing_tag_is_built_confirmed_and_bisected_to_its_commit_on_the_fleet(
    models_dir,
    pg_url,
    private_broker,
    workers,  # noqa: F811
    tmp_path,
):
    history = make_repo()
    remote, mac = tmp_path / "remote.git", tmp_path / "llama.cpp"
    git("clone", "--quiet", "--bare", str(history), str(remote))
    git("-C", str(remote), "tag", "-d", "b4")  # upstream has tagged only b1 so far
    git("clone", "--quiet", str(remote), str(mac))
    for name in HOSTS:  # each a Mac of its own: its own engine environments, the kept builds folder
        workers(
            name,
            models_dir,
            broker=private_broker,
            engines="llama.cpp",
            env={"SILICONBENCH_BUILDS_DIR": str(BUILDS), "SILICONBENCH_ENVS_DIR": str(tmp_path / f"envs-{name}")},
        )
    with database.session_scope(pg_url) as s:
        watches.add(
            s,
            parse_watch(
                {
                    "name": "llama-tags",
                    "every": "1m",
                    "suite": SUITE,
                    "processes": 5,
                    "llama_cpp": {"source": str(mac), "tools": ["llama-bench"]},
                }
            ),
        )
    sched = CliProc(
        "scheduler",
        ["scheduler", "--broker", private_broker, "--tick-s", "2", "--database", pg_url, "--schedule", str(tmp_path / "beat")],
        {},
        tmp_path,
    )  # fmt: skip
    try:
        wait_for(lambda: checks(pg_url) >= 1, 60, what="the first check")  # b1 recorded as seen, no campaign
        assert first(pg_url, Campaign) is None
        git("-C", str(remote), "tag", "b4", shas(history)[3])  # llama.cpp tags b4 upstream
        with database.session_scope(pg_url) as s:  # and the watch's period passes
            s.get(Watch, "llama-tags").last_checked_at -= timedelta(seconds=61)
        c = wait_for(lambda: first(pg_url, Campaign), 60, what="the campaign")
        assert (c.package, c.baseline, c.candidate, sorted(c.hosts)) == ("llama.cpp", "b1", "b4", HOSTS)
        c = wait_for(lambda: ended(pg_url, Campaign), 2400, every_s=2, what="the campaign's end")
        assert c.status == "done", (c.error, c.verdicts)
        b = wait_for(lambda: ended(pg_url, Bisection), 2400, every_s=2, what="the bisection's end")
    finally:
        sched.stop()

    # A look's verdict and what follows it (the next look, a build, a built commit's first look) take one tick, not
    # one each: at the default 60 s tick the host would sit idle up to a minute a look.
    ticks = sched.log_path.read_text()
    decided = r"(next look|step \d+ decided: \w+|built \S+ on \S+|did not build: skipped)"
    assert re.search(decided + "; ", ticks), ticks[-3000:]  # a decision, then in the same tick what follows it
    assert not re.search(decided + "'", ticks), ticks[-3000:]  # and no tick ends on a decision

    # The campaign: both tags built on each host from its checkout (fetched there), measured, a regression.
    assert {h: sorted(v["sent"]) for h, v in c.verdicts["hosts"].items()} == {h: ["b1", "b4"] for h in HOSTS}
    decode = next(v for by in c.verdicts["series"].values() for m, v in by.items() if m == "decode_tps")
    assert decode["verdict"] == "regression" and decode["ratio"] < 0.8, decode
    assert c.verdicts["bisection"] == {"id": b.id}

    # The bisection: on a host that confirmed it, the ends again through llama-bench, then the midpoints.
    assert b.status == "done" and b.outcome == "found", (b.error, b.steps)
    assert b.host in decode["changed_hosts"]
    planted = shas(history)[2]
    assert b.first_bad["sha"] == planted and b.first_bad["subject"] == SUBJECTS[2] and b.first_bad["number"] == 3
    assert b.effect["verdict"] == "regression" and b.effect["ci_high"] < 1.0
    ends, *steps, confirm = b.steps
    assert (ends["kind"], ends["verdict"], ends["sides"]) == ("ends", "regression", ["b1", "b4"])
    assert [(s["commit"]["sha"], s["verdict"]) for s in steps] == [(planted, "bad"), (shas(history)[1], "good")]
    # the commit it names is re-measured against the last good one before it is named
    assert (confirm["kind"], confirm["verdict"], confirm["commit"]["sha"]) == ("confirm", "regression", planted)
    assert confirm["sides"] == ["b1", f"b2+{shas(history)[1][:7]}", f"b3+{planted[:7]}"]  # the good end beside
    assert steps[0]["sides"] == ["b1", f"b3+{planted[:7]}", "b4"]
    with database.session_scope(pg_url) as s:
        f = s.get(Finding, b.finding_id)
        assert f.comparison["bisection_id"] == b.id and f.metric == "decode_tps"
        step_jobs = s.execute(
            select(Job.target_host, Job.spec["engine_version"].as_string(), Result.status)
            .join(Result, Result.job_id == Job.id)
            .where(Job.sweep_id.like(f"bisection-{b.id}-%"))
        ).all()
    assert {host for host, _v, _s in step_jobs} == {b.host}  # every step ran where the regression was confirmed
    assert {v for _h, v, _s in step_jobs} == {"b1", "b4", f"b3+{planted[:7]}", f"b2+{shas(history)[1][:7]}"}
    with database.session_scope(pg_url) as s:  # each round of a step starts with the next side: A B C, B C A ...
        order = list(
            s.scalars(
                select(Job.spec["engine_version"].as_string())
                .where(Job.sweep_id == steps[0]["sweeps"][0])
                .order_by(Job.idx)
            )
        )
    lo, mid, hi = steps[0]["sides"]
    assert order[:9] == [lo, mid, hi, mid, hi, lo, hi, lo, mid], order

    # Its end is announced to the watch's webhook (and `regressions --since`): the commit and its effect.
    with database.session_scope(pg_url) as s:
        (note,) = s.scalars(select(Notification).where(Notification.kind == "bisection"))
        said = message(note.payload, note.kind)
    assert note.payload["outcome"] == "found" and note.payload["first_bad"]["sha"] == planted
    assert f"first bad commit {planted} (b3)" in said and "llama.cpp b1 → b4" in said, said

    # What users read: `siliconbench watch bisections`.
    out = sb("watch", "bisections", "--database", pg_url, "--format", "json")
    assert out.returncode == 0, out.stderr
    (shown,) = json.loads(out.stdout)
    assert shown["id"] == b.id and shown["first_bad"]["sha"] == planted and shown["host"] == b.host
    assert shown["runner"] == "fleet" and shown["outcome"] == "found" and "re-measured" in shown["reason"]
    table = sb("watch", "bisections", "--database", pg_url)
    assert "first bad commit" in table.stdout and planted in table.stdout, table.stdout
