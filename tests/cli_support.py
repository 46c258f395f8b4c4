"""The `siliconbench` command as a user runs it (a subprocess), and a sweep file written for it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import SMALL

ROOT = Path(__file__).resolve().parents[1]


def sb(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def write_sweep(tmp_path: Path, **kw) -> Path:
    data = yaml.safe_load((ROOT / "examples/quickstart.yaml").read_text())
    data.update(
        models=[SMALL], workloads=[{"kind": "generate", "prompt_tokens": [64], "gen_tokens": [16], "depth": [0]}]
    )
    data.update(kw)
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump(data))
    return p
