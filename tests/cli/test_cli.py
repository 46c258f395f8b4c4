"""The CLI end to end on the embedded default: real engines, real SQLite, a real subprocess."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.spec import load_sweep

from siliconbench.embedded.run import plan
from tests.cli_support import sb, write_sweep

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def one_real_run(tmp_path_factory, models_dir) -> Path:
    """The default database after one real `siliconbench run` (both engines), made once for the module: each
    bad-input case starts from a copy of it instead of running the sweep again."""
    home = tmp_path_factory.mktemp("one-run")
    env = {k: v for k, v in os.environ.items() if k not in ("SILICONBENCH_DATABASE_URL", "SILICONBENCH_BROKER_URL")}
    env.update(SILICONBENCH_MODELS_DIR=str(models_dir), XDG_DATA_HOME=str(home / "xdg"))
    r = subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", "run", str(write_sweep(home))],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    return home / "xdg" / "siliconbench" / "siliconbench.sqlite"


def counts(db: Path) -> dict[str, int]:
    con = sqlite3.connect(db)
    try:
        return {
            t: con.execute(f"select count(*) from {t}").fetchone()[0] for t in ("sweeps", "jobs", "results", "samples")
        }
    finally:
        con.close()


def test_a_new_sqlite_file_named_by_the_environment_is_migrated_on_first_use(tmp_path, isolated_env):
    mine = tmp_path / "mine.sqlite"
    r = sb("run", str(write_sweep(tmp_path)), env={"SILICONBENCH_DATABASE_URL": f"sqlite:///{mine}"})
    assert r.returncode == 0, r.stderr
    assert counts(mine)["results"] == 2 and not isolated_env["default_db"].exists()


def test_run_then_results_json(tmp_path, isolated_env):
    run = sb("run", str(write_sweep(tmp_path)))
    assert run.returncode == 0, run.stderr + run.stdout
    assert "llama.cpp" in run.stdout and "mlx" in run.stdout and "prefill tok/s" in run.stdout
    out = sb("results", "--format", "json")
    assert out.returncode == 0, out.stderr
    records = json.loads(out.stdout)
    assert sorted(r["engine"] for r in records) == ["llama.cpp", "mlx"]
    for r in records:
        assert r["status"] == "ok" and r["error"] is None
        for m in ("prefill_tps", "decode_tps", "ttft_ms"):
            assert len(r[m]["samples"]) == 5 and r[m]["min"] > 0
            assert r[m]["min"] <= r[m]["median"] <= r[m]["max"]
        assert r["load_s"] > 0 and r["peak_memory_bytes"] > 0
        assert r["n_prompt"] == 64 and r["n_gen"] == 16 and r["repetitions"] == 5
        assert r["host"]["cores"] >= 1 and r["host"]["memory_bytes"] > 0
        assert len(r["warmup_samples"]) == 1
    csv_out = sb("results", "--format", "csv")
    assert csv_out.returncode == 0 and csv_out.stdout.count("\n") == 3
    assert counts(isolated_env["default_db"])["results"] == 2


@pytest.mark.parametrize(
    "edit, needle",
    [
        ({"engines": ["llama.cpp", "onnx"]}, "engines[1]"),
        ({"models": ["no-such-model"]}, "models[0]"),
        ({"models": ["../../etc"]}, "models[0]"),
        ({"workloads": [{"kind": "generate", "prompt_tokens": [-1]}]}, "prompt_tokens"),
        (
            {
                "workloads": [
                    {"kind": "generate", "prompt_tokens": list(range(1, 200)), "gen_tokens": list(range(1, 60))}
                ]
            },
            "max_jobs",
        ),
    ],
)
def test_bad_sweep_exits_2_and_writes_nothing(tmp_path, isolated_env, one_real_run, edit, needle):
    isolated_env["default_db"].parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal"):  # a database with something in it already (and its log, if SQLite kept one)
        if Path(f"{one_real_run}{suffix}").exists():
            shutil.copyfile(f"{one_real_run}{suffix}", f"{isolated_env['default_db']}{suffix}")
    before = counts(isolated_env["default_db"])
    assert before["results"] == 2
    bad = sb("run", str(write_sweep(tmp_path, **edit)))
    assert bad.returncode == 2
    assert needle in bad.stderr and "Nothing was run" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert counts(isolated_env["default_db"]) == before


def test_bad_sweep_on_fresh_machine_creates_no_database(tmp_path, isolated_env):
    bad = sb("run", str(write_sweep(tmp_path, engines=["tensorrt"])))
    assert bad.returncode == 2 and "Valid choices: llama.cpp, mlx" in bad.stderr
    assert not isolated_env["default_db"].exists()


def test_every_example_validates(isolated_env):
    """Each example expands against a models folder that has its models (pyperf: untested examples fail), through
    the function `run --dry-run` calls (in-process: a fresh interpreter per example cost ~2 s each); the command
    itself is run on one."""
    models_dir = isolated_env["models_dir"]
    names = ModelCatalog(models_dir).names()
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        if path.name.startswith("watch"):
            continue  # a watch, not a sweep: tests/coordinator/test_watch.py
        spec = load_sweep(path)  # structure
        if [m for m in spec.models if m not in names]:
            with pytest.raises(UserError, match="unknown model"):
                plan(spec, models_dir)
        else:
            assert plan(spec, models_dir), path
    res = sb("run", str(ROOT / "examples/quickstart.yaml"), "--dry-run")
    assert res.returncode == 2 and "unknown model 'tiny-llama-30m'" in res.stderr, res.stderr


def test_a_prompt_file_the_runs_repeat_is_noted_before_anything_runs(tmp_path, isolated_env):
    """The dry run (and the run) print a note where a short prompt file's prompts will be sent again."""
    prompts = tmp_path / "two.txt"
    prompts.write_text("the first prompt\nthe second prompt\n")
    sweep = write_sweep(
        tmp_path,
        engines=["llama.cpp"],
        repetitions=3,
        workloads=[{"kind": "serve", "prompts": str(prompts), "endpoint": "completions", "num_requests": 2}],
    )
    res = sb("run", str(sweep), "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "note:" in res.stdout and "holds 2 prompts and the runs send 6" in res.stdout
    assert not isolated_env["default_db"].exists()  # a dry run writes nothing
