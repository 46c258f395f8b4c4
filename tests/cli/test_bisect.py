"""`regressions bisect` on a real llama.cpp history with a planted slowdown (harness/llama_repo.py): ends without a
regression are *equivalent* (exit 5); bad input is refused by field with nothing stored; a confirmed finding starts a
bisection with its series and commits. The journey itself is tests/cli/test_bisect_journey.py.

Builds come from the kept builds folder (tests/cli/test_llama_builds.py says what the first run costs); every
commit is measured through its own llama-bench in fresh processes, interleaved."""

from __future__ import annotations

import json

import pytest

from harness.llama_repo import shas
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import Finding
from tests.cli.bisect_support import bisect, bisect_sweep as _sweep
from tests.cli_support import sb

pytestmark = pytest.mark.timeout(2400)


def test_bisect_says_equivalent_between_ends_without_a_regression(repo, env, tmp_path):
    r = bisect(repo, _sweep(tmp_path), "b1", shas(repo)[1], "--min-effect", "0.15")
    assert r.returncode == 5, r.stdout[-3000:] + r.stderr[-3000:]
    rec = json.loads(r.stdout)
    assert rec["outcome"] == "equivalent" and rec["first_bad"] is None and len(rec["steps"]) == 1
    ends = rec["steps"][0]
    assert 0.85 < ends["against_good"]["eq_low"] and ends["against_good"]["eq_high"] < 1.15
    assert "inside ±15%" in rec["reason"]


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
    for bad_effect in ("1", "0", "-0.1", "0.5"):
        r = bisect(repo, _sweep(tmp_path), "b1", "b4", "--min-effect", bad_effect)
        assert r.returncode == 2 and "--min-effect" in r.stderr and "(0, 0.5)" in r.stderr, r.stderr
    r = sb("regressions", "bisect", str(_sweep(tmp_path)), "--source", str(repo), "--good", "b1", "--bad", "b4",
           "--format", "jsno")  # fmt: skip
    assert r.returncode == 2 and "--format" in r.stderr and "json" in r.stderr
    r = sb("regressions", "bisect", "--resume", "999")
    assert r.returncode == 2 and "--resume" in r.stderr and "no bisection 999" in r.stderr
    assert json.loads(sb("regressions", "bisections", "--format", "json").stdout) == []  # nothing stored


def test_the_example_bisection_sweep_is_one_measurement():
    from siliconbench.contract.spec import load_sweep

    from siliconbench.embedded.bisect import check_spec
    from tests.cli_support import ROOT

    check_spec(load_sweep(ROOT / "examples/bisect.yaml"), "decode_tps")


def _finding(url: str, before_job_id: str, good: str, bad: str, status: str, engine: str = "llama.cpp") -> int:
    """A step in a series' history as `regressions` records it (siliconbench.coordinator.history.regressions.save_findings),
    here between two commits of the repository."""
    with session_scope(url) as s:
        f = Finding(
            key=f"test-{good[:7]}-{bad[:7]}-{status}-{engine}",
            series_id="s",
            series="tiny-llama-5m Q8_0 p16 g16",
            series_key={},
            metric="decode_tps",
            verdict="regression",
            host=None,
            engine=engine,
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
    """--finding measures the finding's series exactly: a non-default option of it (n_batch, n_ubatch) is in
    every look's jobs; a finding measured through the binding is said to be re-measured through llama-bench; a
    finished bisection cannot be resumed."""
    io_comment, planted = shas(repo)[1], shas(repo)[2]
    options = {"llama.cpp": {"n_batch": 256, "n_ubatch": 128}}
    sweep = _sweep(tmp_path, engine_versions={"llama.cpp": [io_comment[:12]]}, processes=1, engine_options=options)
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
    of_mlx = _finding(url, row["job_id"], io_comment, planted, "confirmed", engine="mlx")
    r = sb("regressions", "bisect", "--finding", str(of_mlx), "--source", str(repo))
    assert r.returncode == 2 and "--finding" in r.stderr and "follows a llama.cpp regression" in r.stderr
    confirmed = _finding(url, row["job_id"], io_comment, planted, "confirmed")
    r = sb("regressions", "bisect", "--finding", str(confirmed), "--source", str(repo), "--format", "json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rec = json.loads(r.stdout)
    assert rec["first_bad"]["sha"] == planted and rec["metric"] == "decode_tps" and rec["finding_id"] == confirmed
    assert [s["kind"] for s in rec["steps"]] == ["ends", "confirm"]  # one commit in question, then re-measured
    rows = json.loads(sb("results", "--all", "--format", "json").stdout)
    looks = [row for row in rows if row["sweep_id"].startswith(f"bisection-{rec['id']}-")]
    assert looks and all(
        (row["environment"]["engine_options"]["n_batch"], row["environment"]["engine_options"]["n_ubatch"])
        == (256, 128)
        for row in looks
    )
    again = sb("regressions", "bisect", "--resume", str(rec["id"]))
    assert again.returncode == 2 and "has ended (found)" in again.stderr
