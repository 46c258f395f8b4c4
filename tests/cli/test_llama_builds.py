"""llama.cpp by commit: a real llama.cpp history (harness/llama_repo.py) built, recorded and measured.

The first run on a machine builds the base commit cold (~4-5 min on 2 cores) into the kept builds folder; every
later commit is an incremental build of a file or two, and every later run finds all of them built.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.llama_repo import LLAMA_VERSION, release_archive, shas
from siliconbench.worker.builds import header
from tests.cli_support import sb, write_sweep

pytestmark = pytest.mark.timeout(1800)


def _show(repo, sha: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"{sha}:{path}"], capture_output=True, text=True).stdout


def add(repo, ref: str, *more: str, env: dict | None = None):
    return sb("env", "add", "llama.cpp", "--source", str(repo), "--ref", ref, "--tools", "llama-bench", *more, env=env)


def listed() -> dict[str, dict]:
    r = sb("env", "list", "--format", "json")
    assert r.returncode == 0, r.stderr
    return {e["name"]: e for e in json.loads(r.stdout) if e.get("build")}


def test_the_header_check_reads_what_the_binding_binds(repo):
    binding_version, source = header.binding_source()
    assert binding_version == LLAMA_VERSION
    own = header.binding_header(LLAMA_VERSION)
    first, last = shas(repo)[0], shas(repo)[-1]
    same = header.compare(_show(repo, first, "include/llama.h"), own, source, binding_version)
    assert same.ok and same.checked > 250, same  # every function bound, struct laid out and enum compared
    moved = header.compare(_show(repo, last, "include/llama.h"), own, source, binding_version)
    assert not moved.ok and moved.differing == 1
    assert (
        moved.first_difference.startswith("struct llama_model_params: ") and "planted_field" in moved.first_difference
    )


def test_env_add_builds_a_commit_once_records_it_and_builds_the_next_incrementally(repo, env):
    r = add(repo, "b1")
    assert r.returncode == 0, r.stderr
    assert f"through binding {LLAMA_VERSION}" in r.stdout
    again = add(repo, "b1")
    assert again.returncode == 0 and "built already" in again.stdout, again.stdout
    head = add(repo, "HEAD")
    assert head.returncode == 0, head.stderr
    assert "through its llama-bench" in head.stdout
    builds = listed()
    b1 = builds["llama.cpp-b1"]["build"]
    assert b1["revision"]["sha"] == shas(repo)[0] and b1["revision"]["number"] == 1 and b1["backend"] == "CPU"
    assert b1["compiler"] and "-DBUILD_SHARED_LIBS=ON" in b1["cmake_flags"]
    assert b1["compatibility"]["compatible"] is True
    last = next(b["build"] for b in builds.values() if b["build"]["revision"]["sha"] == shas(repo)[-1])
    assert last["revision"]["number"] == 5 and last["compatibility"]["compatible"] is False
    assert "llama_model_params" in last["compatibility"]["first_difference"]
    # built on top of another commit of the same history: only what changed (the header) was rewritten
    assert last["incremental"] is True and last["changed_files"] <= 4
    table = sb("env", "list")
    assert shas(repo)[0][:12] in table.stdout


def test_a_sweep_measures_one_build_through_the_binding_and_another_through_its_llama_bench(repo, env, tmp_path):
    assert add(repo, "b1").returncode == 0 and add(repo, "HEAD").returncode == 0
    head = next(n for n, b in listed().items() if b["build"]["revision"]["sha"] == shas(repo)[-1])
    sweep = write_sweep(
        tmp_path,
        name="builds",
        engines=["llama.cpp"],
        quantizations=["Q8_0"],
        repetitions=3,
        engine_versions={"llama.cpp": ["b1", head]},
        processes=1,
    )
    r = sb("run", str(sweep))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads(sb("results", "--format", "json").stdout)
    by_commit = {row["commit"]: row for row in rows}
    assert set(by_commit) == {shas(repo)[0], shas(repo)[-1]}, [row.get("error") for row in rows]
    first, last = by_commit[shas(repo)[0]], by_commit[shas(repo)[-1]]
    assert first["status"] == "ok" and last["status"] == "ok"
    assert first["environment"]["engine_build"]["measured_by"] == "binding"
    assert first["environment"]["engine_build"]["binding"] == LLAMA_VERSION
    assert first["environment"]["engine_build"]["build_number"] == "1"
    assert last["environment"]["engine_build"]["measured_by"] == "llama-bench"
    assert last["environment"]["engine_options"]["driver"] == "llama-bench"
    decode = last["decode_tps"]["samples"]
    assert len(decode) == 3 and all(v > 0 for v in decode)
    assert first["engine_version"] == "b1" and last["engine_version"] == head
    assert last["extra"]["tool"]["build_commit"] == shas(repo)[-1][:7]


def test_a_build_the_binding_cannot_drive_is_served_by_its_own_llama_server(repo, env, tmp_path):
    """HEAD's llama.h differs from the binding's: generate goes through its llama-bench, and serve through its own
    llama-server, the client's tokens counted by the wheel's library loaded vocabulary-only."""
    # llama-server's targets (the server, mtmd, common) take ~12 min cold on 2 cores, once per machine: kept builds
    r = sb(
        "env",
        "add",
        "llama.cpp",
        "--source",
        str(repo),
        "--ref",
        "HEAD",
        "--tools",
        "llama-bench,llama-server",
        timeout=1700,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    head = next(
        n
        for n, b in listed().items()
        if b["build"]["revision"]["sha"] == shas(repo)[-1] and "llama-server" in b["build"]["tools"]
    )
    sweep = write_sweep(
        tmp_path,
        name="served",
        engines=["llama.cpp"],
        quantizations=["Q8_0"],
        repetitions=1,
        warmup=0,
        engine_versions={"llama.cpp": [head]},
        processes=1,
        workloads=[{"kind": "serve", "num_requests": 4, "prompt_tokens": 16, "max_tokens": 8, "slots": 2}],
    )
    r = sb("run", str(sweep))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads(sb("results", "--format", "json").stdout)
    assert [row["status"] for row in rows] == ["ok"], [row.get("error") for row in rows]
    row = rows[0]
    assert row["environment"]["engine_build"]["measured_by"] == "llama-server"
    assert row["environment"]["engine_build"]["commit"] == shas(repo)[-1]
    assert row["extra"]["server"] == "llama-server"
    metrics = row["metrics"]
    assert metrics["serve_ttft_ms"]["count"] == 4 and metrics["serve_output_tokens"]["samples"] == [8.0] * 4


def test_the_binding_is_never_driven_on_a_mismatched_library(repo, env, tmp_path):
    assert add(repo, "HEAD").returncode == 0
    head = next(n for n, b in listed().items() if b["build"]["revision"]["sha"] == shas(repo)[-1])
    sweep = write_sweep(
        tmp_path,
        name="insist",
        engines=["llama.cpp"],
        quantizations=["Q8_0"],
        repetitions=1,
        engine_versions={"llama.cpp": [head]},
        processes=1,
        engine_options={"llama.cpp": {"driver": "binding"}},
    )
    r = sb("run", str(sweep))
    assert r.returncode != 0
    rows = json.loads(sb("results", "--format", "json").stdout)
    assert [row["status"] for row in rows] == ["failed"]
    assert "cannot drive the build" in rows[0]["error"] and "llama_model_params" in rows[0]["error"]


def test_bad_sources_and_refs_are_refused_before_anything_is_built(repo, env, tmp_path):
    r = add(repo, "no-such-tag")
    assert r.returncode == 2 and "--ref" in r.stderr and "no-such-tag" in r.stderr
    plain = tmp_path / "not-llama"
    plain.mkdir()
    r = sb("env", "add", "llama.cpp", "--source", str(plain))
    assert r.returncode == 2 and "--source" in r.stderr and "not a llama.cpp source tree" in r.stderr
    r = sb("env", "add", "llama-cpp-python==0.3.36", "--ref", "b1")
    assert r.returncode == 2 and "--ref" in r.stderr
    r = sb("env", "add", "llama.cpp")
    assert r.returncode == 2 and "--source" in r.stderr
    assert listed() == {}


def test_a_sweep_naming_an_unknown_build_is_refused_before_it_runs(repo, env, tmp_path):
    sweep = write_sweep(tmp_path, engines=["llama.cpp"], engine_versions={"llama.cpp": ["b999"]}, processes=1)
    r = sb("run", str(sweep))
    assert r.returncode == 2 and "engine_versions.llama.cpp" in r.stderr
    assert json.loads(sb("results", "--format", "json").stdout) == []


def test_a_release_archive_is_recorded_by_what_it_says_and_measured_through_its_llama_bench(repo, env, tmp_path):
    assert add(repo, "b1").returncode == 0
    built = Path(listed()["llama.cpp-b1"]["build"]["path"]) / "bin"
    archive = release_archive(built, tmp_path / "llama-b1-bin-ubuntu-x64.zip")
    r = sb("env", "add", "llama.cpp", "--prebuilt", str(archive), "--name", "release-b1")
    assert r.returncode == 0, r.stderr
    rec = listed()["release-b1"]["build"]
    assert rec["revision"]["number"] == 1 and shas(repo)[0][:7] in rec["revision"]["describe"]
    assert rec["compatibility"]["compatible"] is False and "no llama.h" in rec["compatibility"]["first_difference"]
    again = sb("env", "add", "llama.cpp", "--prebuilt", str(archive), "--name", "release-b1")
    assert again.returncode == 0 and "recorded already" in again.stdout
    sweep = write_sweep(
        tmp_path,
        name="release",
        engines=["llama.cpp"],
        quantizations=["Q8_0"],
        repetitions=2,
        engine_versions={"llama.cpp": ["release-b1"]},
        processes=1,
    )
    r = sb("run", str(sweep))
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = json.loads(sb("results", "--format", "json").stdout)
    assert row["status"] == "ok" and row["environment"]["engine_build"]["measured_by"] == "llama-bench"
    assert row["engine_version"] == "release-b1" and len(row["decode_tps"]["samples"]) == 2


def test_removing_a_build_keeps_it_in_the_builds_cache(repo, env):
    assert add(repo, "b1").returncode == 0
    path = Path(listed()["llama.cpp-b1"]["build"]["path"])
    r = sb("env", "remove", "llama.cpp-b1")
    assert r.returncode == 0 and listed() == {}
    assert (path / "build.json").exists()
    again = add(repo, "b1")
    assert again.returncode == 0 and "built already" in again.stdout


def test_a_host_without_cmake_is_told_what_to_install(repo, env, tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "git").symlink_to(shutil.which("git"))  # git but no cmake on PATH
    # options no build in the cache has: this one would have to be compiled
    r = add(repo, "b4", "--cmake-flag", "-DSB_TEST_UNBUILT=1", env={"PATH": str(bare)})
    assert r.returncode == 2 and "needs cmake" in r.stderr and "--prebuilt" in r.stderr
    assert listed() == {}
