"""docs/builds-and-bisection.md's journey on a real llama.cpp history with a planted slowdown (harness/llama_repo.py):
two refs added as named builds, compared in a sweep, then `regressions bisect` between them, killed hard after its
first step and resumed: the planted commit named, confirmed, with an interval. A file of its own (the longest test
of the suite): the other bisection tests run beside it on another worker.

Builds come from the kept builds folder (tests/cli/test_llama_builds.py says what the first run costs); every
commit is measured through its own llama-bench in fresh processes, interleaved."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from harness.fleet import wait_for
from harness.llama_repo import SUBJECTS, shas
from tests.cli.bisect_support import bisect_sweep as _sweep, kept_steps as _kept_steps
from tests.cli_support import ROOT, sb

pytestmark = pytest.mark.timeout(2400)


def test_the_readme_journey_env_add_compare_then_bisect_names_the_planted_commit(repo, env, tmp_path):
    """The journey of docs/builds-and-bisection.md as a user runs it: two refs added as named builds, compared in a sweep, then
    `regressions bisect` between them: the planted commit named, confirmed by a re-measurement, the two builds
    `env add` made reused (no second build of either end, no "several environments" between their names)."""
    good, bad = shas(repo)[0], shas(repo)[3]
    for ref, name in ((good, "lc-A"), (bad, "lc-D")):
        added = sb("env", "add", "llama.cpp", "--source", str(repo), "--ref", ref, "--name", name,
                   "--tools", "llama-bench,llama-perplexity")  # fmt: skip
        assert added.returncode == 0, added.stdout[-2000:] + added.stderr[-2000:]
    compared = sb("run", str(_sweep(tmp_path, engine_versions={"llama.cpp": ["lc-A", "lc-D"]}, processes=1)))
    assert compared.returncode == 0, compared.stdout[-2000:] + compared.stderr[-2000:]
    # The bisection is stopped hard once its first step is kept (kill -9 of the process group this test started),
    # then resumed: it goes on from its store, not from the start.
    url = f"sqlite:///{env['default_db']}"
    log = tmp_path / "bisect.log"
    with open(log, "wb") as out:
        run = subprocess.Popen(
            [sys.executable, "-m", "siliconbench.cli.main", "regressions", "bisect", str(_sweep(tmp_path)), "--source",
             str(repo), "--good", good, "--bad", bad, "--format", "json"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def kept_or_ended():  # a bisection that died before its first step fails here, with its words, at once
        kept = _kept_steps(url)
        assert kept or run.poll() is None, f"the bisection exited ({run.returncode}): {log.read_text()[-3000:]}"
        return kept

    try:
        bid = wait_for(kept_or_ended, 1200, every_s=1, what="the bisection's first kept step")
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    r = sb("regressions", "bisect", "--resume", str(bid), "--format", "json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rec = json.loads(r.stdout)
    assert rec["id"] == bid
    planted = shas(repo)[2]
    assert rec["outcome"] == "found" and rec["exit_code"] == 0 and rec["runner"] == "local"
    assert rec["first_bad"]["sha"] == planted and rec["first_bad"]["subject"] == SUBJECTS[2]
    assert rec["first_bad"]["number"] == 3
    effect = rec["effect"]
    assert effect["ratio"] < 0.8 and effect["ci_high"] < 1.0 - rec["min_effect"] and effect["verdict"] == "regression"
    assert rec["effect_from_good"]["ratio"] < 0.8
    ends, *steps, confirm = rec["steps"]
    assert ends["kind"] == "ends" and ends["verdict"] == "regression" and ends["processes"] >= 5
    # three commits in question (2, 3, 4): the midpoint 3 is bad, then 2 is good; then 2 -> 3 re-measured
    assert [(s["commit"]["sha"], s["verdict"]) for s in steps] == [(planted, "bad"), (shas(repo)[1], "good")]
    assert confirm["kind"] == "confirm" and confirm["verdict"] == "regression" and confirm["commit"]["sha"] == planted
    for s in steps:
        assert s["processes"] >= 5 and s["against_good"]["n_baseline"] >= s["processes"]
    # the ends ran on the builds `env add` made: one environment each, no second name for either
    names = {e["name"] for e in json.loads(sb("env", "list", "--format", "json").stdout)}
    assert {"lc-A", "lc-D"} <= names and not {f"llama.cpp-{label}" for label in ("b1", "b4")} & names
    # each look is a stored sweep of ordinary results, carrying their commit
    rows = json.loads(sb("results", "--all", "--format", "json").stdout)
    assert {row["commit"] for row in rows if row["status"] == "ok"} == {shas(repo)[i] for i in (0, 1, 2, 3)}
    listed = json.loads(sb("regressions", "bisections", "--format", "json").stdout)
    assert [b["id"] for b in listed] == [rec["id"]] and listed[0]["outcome"] == "found"
