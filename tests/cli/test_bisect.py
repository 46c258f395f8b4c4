"""`regressions bisect` on a real llama.cpp history with a planted slowdown (harness/llama_repo.py): it must name the
planted commit with an interval, say "no regression" between ends without one, and refuse bad input by field.

Builds come from the kept builds folder (tests/cli/test_llama_builds.py says what the first run costs); every
commit is measured through its own llama-bench in fresh processes, interleaved."""

from __future__ import annotations

import json

import pytest

from harness.llama_repo import SUBJECTS, shas
from storage.database import session_scope
from storage.tables import Finding
from tests.cli_support import sb, write_sweep

pytestmark = pytest.mark.timeout(2400)


def _sweep(tmp_path, **kw):
    return write_sweep(
        tmp_path,
        name="bisect",
        engines=["llama.cpp"],
        quantizations=["Q8_0"],
        repetitions=3,
        workloads=[{"kind": "generate", "prompt_tokens": [16], "gen_tokens": [16], "depth": [0]}],
        **kw,
    )


def bisect(repo, sweep, good: str, bad: str, *more: str):
    return sb(
        "regressions", "bisect", str(sweep), "--source", str(repo), "--good", good, "--bad", bad, "--format", "json",
        *more,
    )  # fmt: skip


def test_bisect_names_the_planted_commit_with_its_effect_and_every_steps_evidence(repo, env, tmp_path):
    r = bisect(repo, _sweep(tmp_path), "b1", "b4")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rec = json.loads(r.stdout)
    planted = shas(repo)[2]
    assert rec["outcome"] == "found"
    assert rec["first_bad"]["sha"] == planted and rec["first_bad"]["subject"] == SUBJECTS[2]
    assert rec["first_bad"]["number"] == 3
    effect = rec["effect"]
    assert effect["ratio"] < 0.8 and effect["ci_high"] < 1.0 and effect["verdict"] == "regression"
    ends, *steps = rec["steps"]
    assert ends["kind"] == "ends" and ends["verdict"] == "regression" and ends["processes"] >= 5
    # three commits in question (2, 3, 4): the midpoint 3 is bad, then 2 is good
    assert [(s["commit"]["sha"], s["verdict"]) for s in steps] == [(planted, "bad"), (shas(repo)[1], "good")]
    for s in steps:
        assert s["processes"] >= 5 and s["against_good"]["n_baseline"] == s["processes"]
    # each step is a stored sweep of ordinary results, carrying their commit
    rows = json.loads(sb("results", "--all", "--format", "json").stdout)
    assert {row["commit"] for row in rows if row["status"] == "ok"} == {shas(repo)[i] for i in (0, 1, 2, 3)}
    assert {row["environment"]["engine_build"]["measured_by"] for row in rows} == {"llama-bench"}


def test_bisect_says_there_is_no_regression_between_ends_without_one(repo, env, tmp_path):
    r = bisect(repo, _sweep(tmp_path), "b1", shas(repo)[1], "--min-effect", "0.15")
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    rec = json.loads(r.stdout)
    assert rec["outcome"] == "no regression" and rec["first_bad"] is None
    assert rec["effect"]["ci_low"] is not None and len(rec["steps"]) == 1


def test_bisect_refuses_bad_input_by_field_before_building(repo, env, tmp_path):
    two_models = _sweep(tmp_path, models=["tiny-llama-5m", "tiny-llama-5m-other"])
    r = bisect(repo, two_models, "b1", "b4")
    assert r.returncode == 2 and "models" in r.stderr
    r = bisect(repo, _sweep(tmp_path), "b1", "b4", "--metric", "ttft_ms")
    assert r.returncode == 2 and "--metric" in r.stderr and "decode_tps" in r.stderr
    r = bisect(repo, _sweep(tmp_path), "b4", "b1")
    assert r.returncode == 2 and "--good" in r.stderr and "not an ancestor" in r.stderr
    r = bisect(repo, _sweep(tmp_path), "b1", "nope")
    assert r.returncode == 2 and "--bad" in r.stderr and "nope" in r.stderr
    assert not (env["data_home"] / "siliconbench" / "bisections").exists()


def test_the_example_bisection_sweep_is_one_measurement():
    from siliconbench.spec import load_sweep

    from embedded.bisect import check_spec
    from tests.cli_support import ROOT

    check_spec(load_sweep(ROOT / "examples/bisect.yaml"), "decode_tps")


def _finding(url: str, before_job_id: str, good: str, bad: str, status: str) -> int:
    """A step in a series' history as `regressions` records it (coordinator.history.regressions.save_findings),
    here between two commits of the repository."""
    with session_scope(url) as s:
        f = Finding(
            key=f"test-{good[:7]}-{bad[:7]}-{status}",
            series_id="s",
            series="tiny-llama-5m Q8_0 p16 g16",
            series_key={},
            metric="decode_tps",
            verdict="regression",
            host=None,
            engine="llama.cpp",
            model="tiny-llama-5m",
            before_job_id=before_job_id,
            after_job_id=before_job_id,
            before={"llama.cpp": good},
            after={"llama.cpp": bad},
            changes={"llama.cpp": [good, bad]},
            ratio=0.5,
            p_value=0.001,
            comparison={},
            status=status,
        )
        s.add(f)
        s.flush()
        return f.id


def test_bisect_starts_from_a_confirmed_finding_with_its_series_and_commits(repo, env, tmp_path):
    io_comment, planted = shas(repo)[1], shas(repo)[2]
    sweep = _sweep(tmp_path, engine_versions={"llama.cpp": [io_comment[:12]]}, processes=1)
    assert (
        sb("env", "add", "llama.cpp", "--source", str(repo), "--ref", io_comment, "--tools", "llama-bench").returncode
        == 0
    )
    assert sb("run", str(sweep)).returncode == 0
    url = f"sqlite:///{env['default_db']}"
    (row,) = json.loads(sb("results", "--format", "json").stdout)
    open_one = _finding(url, row["job_id"], io_comment, planted, "open")
    r = sb("regressions", "bisect", "--finding", str(open_one), "--source", str(repo))
    assert r.returncode == 2 and "--finding" in r.stderr and "confirm it first" in r.stderr
    confirmed = _finding(url, row["job_id"], io_comment, planted, "confirmed")
    r = sb("regressions", "bisect", "--finding", str(confirmed), "--source", str(repo), "--format", "json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rec = json.loads(r.stdout)
    assert rec["first_bad"]["sha"] == planted and rec["metric"] == "decode_tps"
    assert [s["kind"] for s in rec["steps"]] == ["ends"]  # one commit in question: the ends decide it
