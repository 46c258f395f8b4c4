"""Import rules of the house, the layers of README's Layout section:

    cli, dashboard          compositions: anything below them
    embedded                composition of worker and coordinator on one machine
    worker | coordinator    side by side, never importing each other
    storage, migrations     shared storage (tables, sessions, store, job state, broker seam)
    siliconbench            the contract: imports nothing of the project

Two checks: the static graph of every import statement (module level and local alike) between the
project's top-level packages must follow the table below and be acyclic; and each part, imported in a
fresh interpreter, must not pull in an engine or the dashboard's libraries indirectly (sys.modules).
"""

from __future__ import annotations

import ast
import graphlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("siliconbench", "storage", "migrations", "worker", "coordinator", "embedded", "cli", "dashboard")
# Which project packages each package may import (itself always).
ALLOWED = {
    "siliconbench": set(),
    "storage": {"siliconbench"},
    "migrations": {"siliconbench", "storage"},
    "worker": {"siliconbench", "storage"},
    "coordinator": {"siliconbench", "storage"},
    "embedded": {"siliconbench", "storage", "worker", "coordinator"},
    "cli": {"siliconbench", "storage", "worker", "coordinator", "embedded"},
    "dashboard": {"siliconbench", "storage", "worker", "coordinator", "embedded"},
}
ENGINES = ["llama_cpp", "mlx", "mlx_lm"]
DASHBOARD = ["streamlit", "altair", "playwright"]


def modules_of(package: str, skip: tuple[str, ...] = ()) -> list[str]:
    out = []
    for p in sorted((ROOT / package).rglob("*.py")):
        name = ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        if not any(name.startswith(s) for s in skip) and "__main__" not in name:
            out.append(name)
    return out


def imported_names(path: Path) -> list[tuple[str, int]]:
    """Absolute module names imported anywhere in the file (relative imports resolved), with line numbers."""
    package = ".".join(path.relative_to(ROOT).parent.parts)
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                out.append((".".join(base + ([node.module] if node.module else [])), node.lineno))
            else:
                out.append((node.module or "", node.lineno))
    return out


def package_edges() -> dict[tuple[str, str], list[str]]:
    """(importer, imported) top-level project packages -> where, from the source of every module."""
    edges: dict[tuple[str, str], list[str]] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for name, line in imported_names(path):
                top = name.split(".")[0]
                if top in PACKAGES and top != pkg:
                    edges.setdefault((pkg, top), []).append(f"{path.relative_to(ROOT)}:{line}")
    return edges


def loaded_after_import(modules: list[str]) -> set[str]:
    code = ("import importlib, json, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted({k.split('.')[0] for k in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_every_import_between_packages_follows_the_layers():
    edges = package_edges()
    assert edges, "the project's packages import each other somewhere"
    broken = {f"{a} -> {b}": where for (a, b), where in edges.items() if b not in ALLOWED[a]}
    assert not broken, f"imports against the layers: {broken}"


def test_package_import_graph_is_acyclic():
    graph: dict[str, set[str]] = {p: set() for p in PACKAGES}
    for a, b in package_edges():
        graph[a].add(b)
    order = list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError on a cycle
    assert order[0] == "siliconbench" and set(order) == set(PACKAGES)


def test_worker_and_coordinator_never_import_each_other():
    edges = package_edges()
    assert ("worker", "coordinator") not in edges and ("coordinator", "worker") not in edges


WORKER_PLUMBING = modules_of("worker", skip=("worker.engines.llama_cpp", "worker.engines.mlx_lm", "worker.models"))


@pytest.mark.parametrize("part, modules, forbidden", [
    ("siliconbench", modules_of("siliconbench"), ENGINES + DASHBOARD + ["sqlalchemy", "psycopg", "alembic", "celery"]),
    ("storage", modules_of("storage"), ENGINES + DASHBOARD),
    ("coordinator", modules_of("coordinator"), ENGINES + DASHBOARD),
    ("embedded", modules_of("embedded"), ENGINES + DASHBOARD),
    ("cli", modules_of("cli"), ENGINES + DASHBOARD),
    # The worker's plumbing (not its engine adapters) must import without any engine or dashboard.
    ("worker", WORKER_PLUMBING, ENGINES + DASHBOARD),
])
def test_part_does_not_import(part, modules, forbidden):
    assert modules, part
    loaded = loaded_after_import(modules)
    project = {p for p in PACKAGES if p not in ALLOWED[part] | {part}}  # what it may not load, even indirectly
    leaked = loaded & (set(forbidden) | project)
    assert not leaked, f"{part} imports {sorted(leaked)}"


def test_nothing_outside_dashboard_imports_streamlit():
    offenders = []
    for p in ROOT.rglob("*.py"):
        rel = p.relative_to(ROOT)
        if rel.parts[0] in ("dashboard", ".venv", "tests", "build") or "site-packages" in rel.parts:
            continue
        if any(n.split(".")[0] in DASHBOARD for n, _ in imported_names(p)):
            offenders.append(str(rel))
    assert not offenders


@pytest.mark.parametrize("script", sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem != "__init__"))
def test_benchmark_scripts_import(script):
    """The benchmarks follow the layers too: each imports (its heavy work runs only under __main__)."""
    out = subprocess.run([sys.executable, "-c", f"import benchmarks.{script}"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
