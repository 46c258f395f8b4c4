"""The CPU-cost plugin (tests/cpu_cost.py) counts a test's own CPU and its waited-for children's, and reports it."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.cli_support import ROOT

BURN = "import subprocess, sys\n\ndef test_burns_in_a_child():\n    subprocess.run([sys.executable, '-c', 'sum(range(30_000_000))'], check=True)\n\ndef test_idles():\n    pass\n"


def test_a_childs_cpu_is_counted_to_its_test_and_reported(tmp_path):
    (tmp_path / "test_burn.py").write_text(BURN)
    out = tmp_path / "cpu.jsonl"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.cpu_cost", "--cpu-report", str(out), "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(tmp_path / "test_burn.py")],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    rows = {r["test"].split("::")[-1]: r for r in map(json.loads, out.read_text().splitlines())}
    burn, idle = rows["test_burns_in_a_child"], rows["test_idles"]
    assert burn["children_s"] > 0.2 and burn["children_s"] > 10 * idle["children_s"]
    assert burn["wall_s"] >= burn["children_s"] * 0.5  # one child on one core: CPU and wall are alike
    shown = subprocess.run([sys.executable, "-m", "tests.cpu_cost", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert shown.returncode == 0 and "2 tests" in shown.stdout and "test_burns_in_a_child" in shown.stdout
