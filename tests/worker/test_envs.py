"""Engine environments: two real mlx-lm releases side by side in one sweep, and the llama-cpp-python path."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import expand, spec_digest
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.results import JobResult
from siliconbench.contract.spec import COMPARE_PROCESSES, parse_sweep

from siliconbench.worker.envs import venvs as envs
from tests.conftest import SMALL, in_ci
from tests.envs_support import OTHER_MLX_LM, mlx_env

ROOT = Path(__file__).resolve().parents[2]
OWN_MLX_LM = envs.own_version("mlx")


@pytest.fixture(scope="session")
def other_mlx():
    return mlx_env()


@pytest.fixture
def cli_env(isolated_env, other_mlx, monkeypatch):
    monkeypatch.setenv(envs.ENVS_DIR_VAR, str(Path(other_mlx.path).parent))
    return {**isolated_env, "envs_dir": Path(other_mlx.path).parent}


def sb(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=600,
    )


def write_sweep(tmp_path: Path, **kw) -> Path:
    data = {
        "name": "versions",
        "models": [SMALL],
        "engines": ["mlx"],
        "repetitions": 5,
        "warmup": 1,
        "workloads": [{"kind": "generate", "prompt_tokens": [32], "gen_tokens": [16]}],
        **kw,
    }
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_add_records_the_environment_and_is_idempotent(other_mlx):
    assert other_mlx.version == OTHER_MLX_LM and other_mlx.engine == "mlx" and other_mlx.ok()
    assert other_mlx.packages["mlx-lm"] == OTHER_MLX_LM and "mlx" in other_mlx.packages
    # The child's own dependencies are pinned to this interpreter's versions: only the engine moves.
    from importlib.metadata import version

    assert other_mlx.packages["pydantic"] == version("pydantic") and other_mlx.packages["numpy"] == version("numpy")
    again = mlx_env()
    assert again == other_mlx
    root = Path(other_mlx.path).parent
    assert json.loads((root / envs.REGISTRY).read_text())["envs"][other_mlx.name]["python"] == other_mlx.python
    assert envs.python_for("mlx", OTHER_MLX_LM, root=root) == other_mlx.python
    assert envs.python_for("mlx", other_mlx.name, root=root) == other_mlx.python
    assert envs.python_for("mlx", OWN_MLX_LM, root=root) == sys.executable
    assert envs.available("mlx", root=root) == [OWN_MLX_LM, OTHER_MLX_LM]


def test_requirements_are_checked_before_anything_is_installed(tmp_path):
    for bad in ("mlx-lm", "mlx-lm>=0.30", "torch==2.0", "mlx-lm==0.31.*"):
        with pytest.raises(UserError) as err:
            envs.add(bad, root=tmp_path)
        assert err.value.field == "requirement"
    assert not (tmp_path / envs.REGISTRY).exists()
    with pytest.raises(UserError) as err:
        envs.python_for("mlx", "0.29.1", root=tmp_path)
    assert err.value.field == "engine_versions.mlx" and "siliconbench env add mlx-lm==0.29.1" in err.value.message
    assert err.value.choices == [OWN_MLX_LM]
    with pytest.raises(UserError):
        envs.remove("mlx-lm-0.29.1", root=tmp_path)


def test_a_version_pip_cannot_find_fails_cleanly(tmp_path):
    with pytest.raises(UserError) as err:
        envs.add("mlx-lm==0.0.0", root=tmp_path)
    assert "pip could not install mlx-lm==0.0.0" in err.value.message
    assert envs.list_envs(tmp_path) == [] and not (tmp_path / "mlx-lm-0.0.0").exists()


def test_versions_expand_adjacent_and_keep_old_job_ids(models_dir):
    plain = parse_sweep({"name": "s", "models": [SMALL]})
    versioned = parse_sweep(
        {"name": "s", "models": [SMALL], "engine_versions": {"mlx": [OWN_MLX_LM, OTHER_MLX_LM]}, "processes": 1}
    )
    a = expand(plain, ModelCatalog(models_dir))
    b = expand(versioned, ModelCatalog(models_dir), sweep_id=a[0].sweep_id)
    assert [(j.engine, j.engine_version) for j in b] == [
        ("llama.cpp", None),
        ("mlx", OWN_MLX_LM),
        ("mlx", OTHER_MLX_LM),
    ]
    assert b[0].job_id == a[0].job_id  # a job with no version keeps the id it always had
    assert len({j.job_id for j in b}) == 3 and [j.index for j in b] == [0, 1, 2]
    with pytest.raises(UserError) as err:
        parse_sweep({"name": "s", "models": [SMALL], "engines": ["mlx"], "engine_versions": {"llama.cpp": ["0.3.36"]}})
    assert err.value.field == "engine_versions"


def test_a_version_comparing_sweep_runs_interleaved_rounds_of_fresh_processes(models_dir):
    spec = parse_sweep({"name": "s", "models": [SMALL], "engine_versions": {"mlx": [OWN_MLX_LM, OTHER_MLX_LM]}})
    assert spec.processes is None and spec.resolved_processes == COMPARE_PROCESSES
    jobs = expand(spec, ModelCatalog(models_dir))
    assert len(jobs) == 3 * COMPARE_PROCESSES and len({j.job_id for j in jobs}) == len(jobs)
    # Round by round: every engine and version of the configuration, adjacent, then the next round.
    assert [(j.engine, j.engine_version, j.process) for j in jobs[:6]] == [
        ("llama.cpp", None, 0),
        ("mlx", OWN_MLX_LM, 0),
        ("mlx", OTHER_MLX_LM, 0),
        ("llama.cpp", None, 1),
        ("mlx", OWN_MLX_LM, 1),
        ("mlx", OTHER_MLX_LM, 1),
    ]
    assert [j.index for j in jobs] == list(range(len(jobs)))
    assert parse_sweep({"name": "s", "models": [SMALL]}).resolved_processes == 1  # a plain sweep: one each
    three = expand(
        parse_sweep({"name": "s", "models": [SMALL], "engines": ["mlx"], "processes": 3}), ModelCatalog(models_dir)
    )
    assert [j.process for j in three] == [0, 1, 2] and len({j.job_id for j in three}) == 3
    # ... but one measurement: the dashboard pools the processes of a configuration as one series.
    assert len({JobResult(job_id=j.job_id, status="ok").identity_hash(j) for j in three}) == 1


def test_rotated_rounds_start_each_round_with_the_next_version_and_keep_the_ids(models_dir):
    three = {"mlx": [OWN_MLX_LM, OTHER_MLX_LM, "0.30.0"]}
    base = {"name": "s", "models": [SMALL], "engines": ["mlx"], "engine_versions": three, "processes": 4}
    fixed = expand(parse_sweep(base), ModelCatalog(models_dir))
    rotated = expand(
        parse_sweep({**base, "version_order": "rotate"}), ModelCatalog(models_dir), sweep_id=fixed[0].sweep_id
    )
    a, b, c = three["mlx"]
    assert [j.engine_version for j in rotated] == [a, b, c, b, c, a, c, a, b, a, b, c]
    assert [j.engine_version for j in fixed] == [a, b, c] * 4
    assert [j.index for j in rotated] == list(range(12)) and [j.process for j in rotated] == [
        r for r in range(4) for _ in "abc"
    ]
    # The same measurements, in another order: each job keeps its id; a fixed sweep keeps the digest it had.
    assert {j.job_id: j.engine_version for j in rotated} == {j.job_id: j.engine_version for j in fixed}
    assert spec_digest(parse_sweep(base)) == spec_digest(parse_sweep({**base, "version_order": "fixed"}))


def test_two_mlx_lm_versions_side_by_side_in_one_sweep_then_compare(tmp_path, cli_env):
    run = sb("run", str(write_sweep(tmp_path, engine_versions={"mlx": [OWN_MLX_LM, OTHER_MLX_LM]}, processes=4)))
    assert run.returncode == 0, run.stderr + run.stdout
    out = sb("results", "--format", "json")
    records = json.loads(out.stdout)
    assert len(records) == 8
    got = sorted(r["environment"]["packages"]["mlx-lm"] for r in records)
    assert got == sorted([OWN_MLX_LM, OTHER_MLX_LM] * 4)  # each job ran under its own version's interpreter
    assert {r["engine_version"] for r in records} == {OWN_MLX_LM, OTHER_MLX_LM}
    # This shared VM's hypervisor has taken 15-30% of the cores during a run: such jobs are contended (the busy gate)
    # and compare leaves them out by default, saying so. This test is about versions side by side, so it takes all.
    disturbed = sum(
        bool((r["extra"].get("busy") or {}).get("contended") or (r["extra"].get("thermal") or {}).get("throttled"))
        for r in records
    )
    cmp = sb(
        "compare",
        "--baseline",
        f"mlx-lm={OTHER_MLX_LM}",
        "--candidate",
        f"mlx-lm={OWN_MLX_LM}",
        "--format",
        "json",
        "--include-disturbed",
    )
    assert cmp.returncode == 0, cmp.stderr
    rows = json.loads(cmp.stdout)
    assert {r["metric"] for r in rows} == {"prefill_tps", "decode_tps", "ttft_ms"}
    for r in rows:
        assert r["verdict"] in ("regression", "improvement", "equivalent", "inconclusive")
        assert r["n_baseline"] == r["n_candidate"] == 4 and r["p_value"] is not None  # processes a side
        assert r["samples_baseline"] == 20
        assert r["baseline"] == f"mlx-lm {OTHER_MLX_LM}" and r["candidate"] == f"mlx-lm {OWN_MLX_LM}"
    table = sb("compare", "-b", f"mlx-lm={OTHER_MLX_LM}", "-c", f"mlx-lm={OWN_MLX_LM}")
    assert table.returncode == 0 and "verdict" in table.stdout
    said = f"{disturbed} disturbed result{'s' if disturbed != 1 else ''} left out"
    assert (said in table.stdout) == bool(disturbed), table.stdout[-2000:]  # what it left out, said beside it


def test_a_version_this_host_lacks_is_refused_before_anything_is_written(tmp_path, cli_env):
    run = sb("run", str(write_sweep(tmp_path, engine_versions={"mlx": ["0.29.1"]})))
    assert run.returncode == 2
    assert "engine_versions.mlx" in run.stderr and "siliconbench env add mlx-lm==0.29.1" in run.stderr
    db = cli_env["default_db"]
    if db.exists():
        assert sqlite3.connect(db).execute("select count(*) from sweeps").fetchone()[0] == 0


def test_env_list_shows_own_and_environments(cli_env):
    out = sb("env", "list", "--format", "json")
    rows = json.loads(out.stdout)
    mlx = {r["name"]: r["version"] for r in rows if r["engine"] == "mlx"}
    assert mlx["(own)"] == OWN_MLX_LM and OTHER_MLX_LM in mlx.values()
    assert "mlx-lm-" + OTHER_MLX_LM in sb("env", "list").stdout


def test_llama_cpp_python_from_the_wheel_cache_records_its_build_then_removes(tmp_path, models_dir):
    wheels = envs.default_find_links()
    own = envs.own_version("llama.cpp")
    if wheels is None or not list(wheels.glob(f"llama_cpp_python-{own}-*.whl")):
        if in_ci():
            pytest.fail("CI must have the llama-cpp-python wheel cache that bootstrap builds")
        pytest.skip("no llama-cpp-python wheel cache on this machine")
    root = tmp_path / "envs"
    env = envs.add(f"llama-cpp-python=={own}", name="llama-test", root=root)  # from the wheel: never a build
    assert env.packages["llama-cpp-python"] == own and env.engine == "llama.cpp"
    from siliconbench.worker.job.child import run_in_child

    spec = parse_sweep(
        {
            "name": "l",
            "models": [SMALL],
            "engines": ["llama.cpp"],
            "repetitions": 2,
            "workloads": [{"kind": "generate", "prompt_tokens": [16], "gen_tokens": [8]}],
        }
    )
    job = expand(spec, ModelCatalog(models_dir))[0]
    res = run_in_child(job, models_dir, python=envs.python_for("llama.cpp", "llama-test", root=root))
    assert res.status == "ok", res.error
    assert res.environment.packages == {"llama-cpp-python": own}
    assert res.environment.engine_build["commit"]  # the llama.cpp commit the wheel carries
    removed = envs.remove(f"llama-cpp-python=={own}", root=root)
    assert removed.name == "llama-test" and not Path(removed.path).exists() and envs.list_envs(root) == []
