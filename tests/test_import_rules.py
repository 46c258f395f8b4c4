"""Import rules of the house: the contract is pure, the coordinator imports no engine, and nothing
outside dashboard/ imports Streamlit. Each part is imported in a fresh interpreter and its
sys.modules inspected, so an indirect import is caught too."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ["llama_cpp", "mlx", "mlx_lm"]
DASHBOARD = ["streamlit", "altair", "playwright"]


def modules_of(package: str, skip: tuple[str, ...] = ()) -> list[str]:
    base = ROOT / package
    out = []
    for p in sorted(base.rglob("*.py")):
        rel = p.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        if not any(name.startswith(s) for s in skip) and "__main__" not in name:
            out.append(name)
    return out


def loaded_after_import(modules: list[str]) -> set[str]:
    code = ("import importlib, json, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted({k.split('.')[0] for k in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


CONTRACT = [m for m in modules_of("siliconbench") if not m.startswith("siliconbench.cli")]


@pytest.mark.parametrize("part, modules, forbidden", [
    ("contract", CONTRACT, ENGINES + DASHBOARD + ["sqlalchemy", "psycopg", "alembic"]),
    ("coordinator", modules_of("coordinator"), ENGINES + DASHBOARD),
    ("cli", modules_of("siliconbench/cli"), ENGINES + DASHBOARD),
    # The worker's plumbing (not its engine adapters) must import without any engine or dashboard.
    ("worker", modules_of("worker", skip=("worker.engines.llama_cpp", "worker.engines.mlx_lm", "worker.models")),
     ENGINES + DASHBOARD),
])
def test_part_does_not_import(part, modules, forbidden):
    assert modules, part
    leaked = loaded_after_import(modules) & set(forbidden)
    assert not leaked, f"{part} imports {sorted(leaked)}"


def test_worker_imports_without_dashboard_dependencies():
    mods = modules_of("worker")
    assert not loaded_after_import(mods) & set(DASHBOARD)


def test_nothing_outside_dashboard_imports_streamlit():
    offenders = []
    for p in ROOT.rglob("*.py"):
        rel = p.relative_to(ROOT)
        if rel.parts[0] in ("dashboard", ".venv", "tests", "build") or "site-packages" in rel.parts:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n.split(".")[0] == "streamlit" for n in names):
                offenders.append(str(rel))
    assert not offenders
