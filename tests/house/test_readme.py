"""The README and docs/ stay true: docs/metrics.md's table is the registry's, docs/settings.md's the Settings class
(and every variable the code reads is a setting), the README's commands exist, its links lead somewhere, and a
newcomer meets what it is, the Mac caveat, set-up and the three journeys on its first two screens."""

from __future__ import annotations

import re
from pathlib import Path

from siliconbench.contract.metrics_doc import markdown_table
from siliconbench.contract.settings import Settings
from siliconbench.contract.settings_doc import markdown_table as settings_table

from tests.house.files import project_files

ROOT = Path(__file__).resolve().parents[2]


def test_metric_table_is_generated_from_the_registry():
    text = (ROOT / "docs/metrics.md").read_text()
    inside = re.search(r"<!-- metrics:begin -->\n(.*?)\n<!-- metrics:end -->", text, re.S)
    assert inside, "docs/metrics.md lacks the metrics markers"
    assert inside.group(1).strip() == markdown_table().strip(), (
        "docs/metrics.md's metric table is stale: regenerate it with `python -m siliconbench.contract.metrics_doc`"
    )


def test_settings_table_is_generated_from_settings():
    """One table names every setting, row for row the Settings class (its description and default)."""
    text = (ROOT / "docs/settings.md").read_text()
    inside = re.search(r"<!-- settings:begin -->\n(.*?)\n<!-- settings:end -->", text, re.S)
    assert inside, "docs/settings.md lacks the settings markers"
    assert inside.group(1).strip() == settings_table().strip(), (
        "docs/settings.md's settings table is stale: regenerate it with `python -m siliconbench.contract.settings_doc`"
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


def test_the_parallel_part_starts_the_longest_files_first():
    """tests/conftest.py's order reaches pytest-xdist only with --no-loadscope-reorder (else xdist re-sorts files by
    their number of tests), and names files that exist (a renamed file would silently drop back to its area)."""
    from tests.conftest import LONGEST_FILES

    parallel = next(line for line in (ROOT / "Makefile").read_text().splitlines() if '-m "not solo' in line)
    assert "--dist loadfile" in parallel and "--no-loadscope-reorder" in parallel, parallel
    assert [f for f in LONGEST_FILES if not (ROOT / f).is_file()] == []


README_MAX_LINES = 300
SCREEN_LINES = 50  # what a terminal or a browser shows at once


def test_the_readme_is_short_and_says_first_what_a_newcomer_needs():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README is {len(lines)} lines: move detail into docs/"
    first_two_screens = "\n".join(lines[: 2 * SCREEN_LINES])
    for needed in ("llama.cpp", "MLX", "Nothing has run on a Mac yet", "make quickstart", "make test"):
        assert needed in first_two_screens, needed
    journeys = [m.group(1) for m in re.finditer(r"^### \d\. (.+)$", text, re.M)]
    assert journeys == [
        "Submit a sweep from the dashboard",
        "Add a Mac mini as a worker",
        "Track a regression down to a commit",
    ]


def test_every_link_of_the_readme_and_docs_leads_to_a_file():
    """Relative links of README.md and docs/*.md (anchors aside) name files that exist."""
    broken = []
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("*/README.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", md.read_text()):
            if target.startswith(("http://", "https://", "#", "mailto:")):
                continue
            if not (md.parent / target.split("#")[0]).exists():
                broken.append(f"{md.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_every_doc_is_on_the_readmes_map():
    text = (ROOT / "README.md").read_text()
    unlisted = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"(docs/{p.name})" not in text]
    assert not unlisted, f"docs/ files the README's map does not list: {unlisted}"


def test_every_code_block_of_the_readme_and_docs_is_closed():
    """An unclosed ``` turns the rest of a page into code (it once swallowed the README's journeys)."""
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        fences = [line for line in md.read_text().splitlines() if line.lstrip().startswith("```")]
        assert len(fences) % 2 == 0, f"{md.relative_to(ROOT)}: {len(fences)} fences"
