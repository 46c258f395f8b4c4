"""The README stays true: its metric table is the registry's, its settings table the Settings class (and every
variable the code reads is a setting), its commands exist."""

from __future__ import annotations

import re
from pathlib import Path

from siliconbench.contract.metrics_doc import markdown_table
from siliconbench.contract.settings import Settings
from siliconbench.contract.settings_doc import markdown_table as settings_table

from tests.house.files import project_files

ROOT = Path(__file__).resolve().parents[2]


def test_metric_table_is_generated_from_the_registry():
    text = (ROOT / "README.md").read_text()
    inside = re.search(r"<!-- metrics:begin -->\n(.*?)\n<!-- metrics:end -->", text, re.S)
    assert inside, "README lacks the metrics markers"
    assert inside.group(1).strip() == markdown_table().strip(), (
        "README's metric table is stale: regenerate it with `python -m siliconbench.contract.metrics_doc`"
    )


def test_settings_table_is_generated_from_settings():
    """One README table names every setting, row for row the Settings class (its description and default)."""
    text = (ROOT / "README.md").read_text()
    inside = re.search(r"<!-- settings:begin -->\n(.*?)\n<!-- settings:end -->", text, re.S)
    assert inside, "README lacks the settings markers"
    assert inside.group(1).strip() == settings_table().strip(), (
        "README's settings table is stale: regenerate it with `python -m siliconbench.contract.settings_doc`"
    )


# SILICONBENCH_API_TOKEN: read by no code, a made-up variable tests/worker/test_service.py passes to show that the env
# file carries any; SILICONBENCH_DASHBOARD: a prefix (the dashboard's settings), as the auth test clears them.
NOT_READ = {"SILICONBENCH_API_TOKEN", "SILICONBENCH_DASHBOARD"}


def test_every_variable_the_code_reads_is_a_setting():
    """Every SILICONBENCH_* name in the project's code, scripts, compose file and tests is a Settings field (a
    name ending in _ is a prefix: SILICONBENCH_OIDC_*)."""
    fields = {f"SILICONBENCH_{f.upper()}" for f in Settings.model_fields}
    found: dict[str, str] = {}
    for path in project_files(ROOT, (".py", ".sh", ".yaml", ".yml", "")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] == "docs":
            continue
        for name in re.findall(r"SILICONBENCH_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(errors="replace")):
            found.setdefault(name, str(rel))
    unknown = {n: where for n, where in found.items() if n not in fields | NOT_READ}
    assert not unknown, f"variables read but not Settings fields (name: first file): {unknown}"
    assert len(found) >= 30


def test_setup_commands_are_make_targets():
    text = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    for target in ("quickstart", "test"):
        assert f"make {target}" in text and re.search(rf"^{target}:", makefile, re.M)
    assert "make test" in (ROOT / ".ci/run").read_text()
