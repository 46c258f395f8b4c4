"""The README stays true: its metric table is the registry's, it names every setting, its commands exist."""

from __future__ import annotations

import re
from pathlib import Path

from siliconbench.metrics_doc import markdown_table
from siliconbench.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_metric_table_is_generated_from_the_registry():
    text = (ROOT / "README.md").read_text()
    inside = re.search(r"<!-- metrics:begin -->\n(.*?)\n<!-- metrics:end -->", text, re.S)
    assert inside, "README lacks the metrics markers"
    assert inside.group(1).strip() == markdown_table().strip(), \
        "README's metric table is stale: regenerate it with `python -m siliconbench.metrics_doc`"


def test_every_setting_is_documented():
    """Each SILICONBENCH_* setting of siliconbench.settings is named in the README (its table of settings)."""
    text = (ROOT / "README.md").read_text()
    missing = [f"SILICONBENCH_{f.upper()}" for f in Settings.model_fields if f"SILICONBENCH_{f.upper()}" not in text]
    assert not missing, f"settings the README does not name: {missing}"


def test_setup_commands_are_make_targets():
    text = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    for target in ("quickstart", "test"):
        assert f"make {target}" in text and re.search(rf"^{target}:", makefile, re.M)
    assert "make test" in (ROOT / ".ci/run").read_text()
