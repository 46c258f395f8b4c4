"""Change points over seeded histories, findings, a real A/B/A/B confirmation, and the Regressions page."""

from __future__ import annotations

import io
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from siliconbench.coordinator.history.load import load_points
from siliconbench.coordinator.history.regressions import change_points, find_steps, list_findings, save_findings
from siliconbench.storage.database import session_scope
from tests.envs_support import OTHER_MLX_LM, mlx_env
from tests.history_seed import OWN_MLX_LM, history, seed_results
from tests.page_support import run_page

ROOT = Path(__file__).resolve().parents[2]


def sb(*args, env: dict):
    return subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )


# ----------------------------------------------------------------------------------- the detector alone


def test_change_points_find_a_step_and_leave_noise_alone():
    rng = random.Random(1)
    flat = [100 * (1 + rng.gauss(0, 0.01)) for _ in range(30)]
    assert change_points(flat) == []
    step = flat[:15] + [x * 0.9 for x in flat[15:]]
    assert change_points(step) == [15]
    assert change_points([100, 90]) == [1]  # two points: PELT proposes, the samples' test decides
    assert change_points([100]) == []


# ------------------------------------------------------------------------------------- seeded history


@pytest.fixture
def url(sqlite_url):
    return sqlite_url


def test_steps_name_the_version_that_changed(url, models_dir):
    history(url, models_dir)
    with session_scope(url) as s:
        steps = find_steps(load_points(s))
    assert len(steps) == 1, [st.as_dict() for st in steps]
    st = steps[0]
    assert st.metric == "decode_tps" and st.comparison.verdict.value == "regression" and st.order == "version"
    assert st.changes == {"mlx-lm": [OTHER_MLX_LM, OWN_MLX_LM]} and st.index == 8 and st.n_points == 12
    assert st.comparison.ratio == pytest.approx(0.88, abs=0.01)


def test_regressions_cli_records_findings_once(url, models_dir, tmp_path):
    history(url, models_dir)
    env = {"SILICONBENCH_DATABASE_URL": url, "XDG_DATA_HOME": str(tmp_path / "xdg")}
    out = sb("regressions", env=env)
    assert out.returncode == 0, out.stderr
    assert "regression" in out.stdout and f"mlx-lm {OTHER_MLX_LM} → {OWN_MLX_LM}" in out.stdout
    out = sb("regressions", "--format", "json", env=env)
    data = json.loads(out.stdout)
    assert len(data) == 1 and data[0]["finding_id"] == 1 and data[0]["verdict"] == "regression"
    with session_scope(url) as s:
        assert [f["id"] for f in list_findings(s)] == [1]  # the same step seen twice is one finding
    out = sb("regressions", "--where", "mlx-lm=0.30.7", "--format", "json", env=env)
    assert json.loads(out.stdout) == []


def test_a_step_with_too_few_processes_is_reported_untested_not_found(url, models_dir, tmp_path):
    # Two single-process nightlies a version: PELT proposes the 12% step, but 2 vs 2 processes cannot be
    # significant, so it is no finding; the CLI says what would settle it instead of staying silent.
    seed_results(
        url,
        models_dir,
        [
            {"mlx_lm": v, "day": i, "medians": {"decode_tps": 400.0 * (0.88 if i > 1 else 1)}}
            for i, v in enumerate([OTHER_MLX_LM] * 2 + [OWN_MLX_LM] * 2)
        ],
    )
    with session_scope(url) as s:
        assert find_steps(load_points(s), metrics=("decode_tps",)) == []
    out = sb(
        "regressions",
        "-m",
        "decode_tps",
        env={"SILICONBENCH_DATABASE_URL": url, "XDG_DATA_HOME": str(tmp_path / "xdg")},
    )
    assert out.returncode == 0, out.stderr
    assert "1 proposed step(s) not tested yet" in out.stdout and f"mlx-lm {OTHER_MLX_LM} → {OWN_MLX_LM}" in out.stdout


# ----------------------------------------------------------------------------------- real confirmation


@pytest.fixture(scope="session")
def other_mlx():
    return mlx_env()


def test_confirm_runs_ab_ab_on_this_host_and_attaches_the_result(url, models_dir, other_mlx, tmp_path):
    history(url, models_dir, confirmable=True)
    with session_scope(url) as s:
        steps = save_findings(s, find_steps(load_points(s), metrics=("decode_tps",)))
    fid = steps[0].finding_id
    env = {
        "SILICONBENCH_DATABASE_URL": url,
        "SILICONBENCH_MODELS_DIR": str(models_dir),
        "SILICONBENCH_ENVS_DIR": str(Path(other_mlx.path).parent),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
    }
    out = sb("confirm", str(fid), "--rounds", "1", env=env)
    assert out.returncode == 2 and "--rounds" in out.stderr  # 1 process a side can never be significant
    out = sb("confirm", str(fid), "--rounds", "4", "--repetitions", "3", env=env)
    assert out.returncode == 0, out.stderr + out.stdout
    assert f"finding {fid}" in out.stdout
    with session_scope(url) as s:
        f = list_findings(s)[0]
        pts = sorted(load_points(s, f["confirm_sweep_id"]), key=lambda p: p.when)
    assert f["status"] in ("confirmed", "not_confirmed", "inconclusive")
    r = f["confirm_result"]
    assert r["baseline"] == OTHER_MLX_LM and r["candidate"] == OWN_MLX_LM and r["rounds"] == 4
    assert r["n_baseline"] == r["n_candidate"] == 4 and r["samples_baseline"] == 12  # processes, repetitions
    assert r["p_value"] is not None and r["verdict"] in ("regression", "equivalent", "inconclusive", "improvement")
    # Interleaved A/B/A/B, each job a fresh process under its own version's interpreter.
    assert [p.components["mlx-lm"] for p in pts] == [OTHER_MLX_LM, OWN_MLX_LM] * 4


def test_confirm_refuses_what_cannot_run_side_by_side(url, models_dir, tmp_path):
    seed_results(
        url,
        models_dir,
        [
            {"mlx_lm": OWN_MLX_LM, "os": "Debian 12.1", "medians": {"decode_tps": 400.0}, "processes": 4},
            {"mlx_lm": OWN_MLX_LM, "os": "Debian 12.2", "medians": {"decode_tps": 300.0}, "processes": 4},
        ],
    )
    with session_scope(url) as s:
        steps = save_findings(s, find_steps(load_points(s), metrics=("decode_tps",)))
    assert steps and steps[0].changes == {"os": ["Debian 12.1", "Debian 12.2"]}
    env = {
        "SILICONBENCH_DATABASE_URL": url,
        "SILICONBENCH_MODELS_DIR": str(models_dir),
        "SILICONBENCH_ENVS_DIR": str(tmp_path / "no-envs"),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
    }
    out = sb("confirm", str(steps[0].finding_id), env=env)
    assert out.returncode == 2 and "cannot be run side by side" in out.stderr
    with session_scope(url) as s:
        assert list_findings(s)[0]["status"] == "open"


# ------------------------------------------------------------------------------------- dashboard page


def test_regressions_page_shows_findings_history_and_confirms(url, models_dir, tmp_path, monkeypatch):
    from siliconbench.embedded import confirm

    history(url, models_dir)
    at = run_page("regressions", url, monkeypatch, tmp_path)
    assert any("No findings yet" in i.value for i in at.info)
    at.button(key="rg_scan").click().run()
    assert not at.exception and any("1 steps passed" in s.value for s in at.success)
    df = at.dataframe[0].value
    assert list(df["verdict"]) == ["regression"] and list(df["metric"]) == ["decode_tps"]
    assert f"mlx-lm {OTHER_MLX_LM} → {OWN_MLX_LM}" in df["what changed"][0]
    (chart,) = at.get("vega_lite_chart")  # the series' history: 12 points, the step marked where it starts
    rows = [pa.ipc.open_stream(io.BytesIO(d.data.data)).read_all().to_pylist() for d in chart.proto.datasets]
    points = max(rows, key=len)
    assert len(points) == 12 and [p["step"] for p in points].index("regression") == 8
    started = []
    monkeypatch.setattr(confirm, "start_background", lambda fid, **kw: started.append(fid) or 4242)
    at.button(key="rg_confirm").click().run()
    assert not at.exception and started == [1] and any("4242" in s.value for s in at.success)


def test_start_background_really_starts_the_cli(url, tmp_path, monkeypatch):
    from siliconbench.embedded.confirm import start_background

    monkeypatch.setenv("SILICONBENCH_DATABASE_URL", url)
    pid = start_background(999, log_dir=tmp_path)
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
        except ChildProcessError:
            break
    log = (tmp_path / "confirm-999.log").read_text()
    assert "no finding 999" in log and socket.gethostname()
