"""One installed name: the wheel built from this checkout puts ``siliconbench`` (and its dist-info) into
site-packages and nothing else, and that install runs on its own — in a fresh venv, from a folder that is not
the checkout, so nothing of the checkout can be imported by accident.

What it runs there: the command and ``python -m siliconbench``, the quickstart's dry run, ``doctor``, the frozen
migrations (``db upgrade``), and one real llama.cpp job, whose child process (``python -m
siliconbench.worker.job.child_main``) must import the installed package.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.fleet import ROOT
from tests.cli_support import write_sweep
from tests.kept import kept_dir

PIP_TIMEOUT_S = 900


def _run(cmd: list, cwd: Path, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env or dict(os.environ)
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of a copy of the checkout's tracked sources (building in place would leave build/ behind)."""
    src = tmp_path_factory.mktemp("src")
    tracked = _run(["git", "ls-files", "pyproject.toml", "README.md", "siliconbench"], ROOT).stdout.split()
    for rel in tracked:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    out = tmp_path_factory.mktemp("wheel")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, src], src, timeout=PIP_TIMEOUT_S)
    assert built.returncode == 0, built.stderr[-3000:]
    (whl,) = out.glob("siliconbench-*.whl")
    return whl


def test_the_wheel_holds_one_top_level_name(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"siliconbench", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}, tops
    # The data the packages read at run time travels with them.
    for data in ("siliconbench/migrations/script.py.mako", "siliconbench/worker/models/data/corpus.txt"):
        assert data in names, data
    assert any(n.startswith("siliconbench/migrations/versions/0015_") for n in names)


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the wheel and its llama.cpp extra (the binding from the bootstrap's wheel cache)."""
    venv = tmp_path_factory.mktemp("venv")
    assert _run([sys.executable, "-m", "venv", venv], venv).returncode == 0
    cache = Path(os.environ.get("SILICONBENCH_WHEEL_CACHE") or kept_dir("wheels"))
    pip = _run(
        [
            venv / "bin/python",
            "-m",
            "pip",
            "install",
            "-q",
            "--find-links",
            cache,
            f"siliconbench[llamacpp] @ {wheel.as_uri()}",
        ],
        venv,
        timeout=PIP_TIMEOUT_S,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    return venv


def test_the_install_puts_only_siliconbench_into_site_packages(installed):
    (site,) = installed.glob("lib/python*/site-packages")
    (dist,) = site.glob("siliconbench-*.dist-info")
    record = [line.split(",")[0] for line in (dist / "RECORD").read_text().splitlines() if line]
    placed = {p.split("/")[0] for p in record if not p.startswith("..")}  # ../../../bin/siliconbench: the command
    assert placed == {"siliconbench", dist.name}, placed
    assert any(p.endswith("bin/siliconbench") for p in record)


def test_the_install_runs_from_outside_the_checkout(installed, tmp_path, models_dir):
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SILICONBENCH_", "PYTHON", "VIRTUAL_ENV"))} | {
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "SILICONBENCH_MODELS_DIR": str(models_dir),
        "SILICONBENCH_BUSY_CPU_PCT": "100",  # the suite's other workers keep this machine busy on purpose
        "PATH": f"{installed / 'bin'}{os.pathsep}{os.environ['PATH']}",
    }
    sb = installed / "bin/siliconbench"

    def run(*args, timeout=600):
        return _run([*args], tmp_path, env, timeout)

    assert run(sb, "--help").returncode == 0
    as_module = run(installed / "bin/python", "-m", "siliconbench", "--help")
    assert as_module.returncode == 0 and "Usage: siliconbench" in as_module.stdout, as_module.stderr[-2000:]
    where = run(installed / "bin/python", "-c", "import siliconbench; print(siliconbench.__file__)")
    assert where.stdout.strip().startswith(str(installed)), where.stdout  # the installed copy, not the checkout's

    sweep = write_sweep(tmp_path, engines=["llama.cpp"], repetitions=1, warmup=0)
    dry = run(sb, "run", sweep, "--dry-run")
    assert dry.returncode == 0 and "1 job" in dry.stdout, dry.stdout + dry.stderr

    doctor = run(sb, "doctor")
    status = {parts[1]: parts[0] for parts in (line.split() for line in doctor.stdout.splitlines()) if len(parts) > 2}
    # The engine it holds imports in a fresh interpreter started in the package's import root.
    assert status.get("llama.cpp") == "ok", doctor.stdout
    assert "mlx" not in status and doctor.returncode == 0, doctor.stdout  # an engine not installed is no problem

    upgraded = run(sb, "db", "upgrade")  # the frozen migrations, located inside the installed package
    assert upgraded.returncode == 0, upgraded.stderr[-2000:]

    ran = run(sb, "run", sweep, timeout=900)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    out = run(sb, "results", "--format", "json")
    (result,) = json.loads(out.stdout)
    assert result["status"] == "ok" and result["metrics"]["decode_tps"]["median"] > 0, result
