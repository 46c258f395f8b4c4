"""Import rules of the house, the layers of README's Layout section:

    tests | benchmarks      each may import the harness and the project, never each other
    harness                 real processes and tools both use: anything of the project
    cli, dashboard          compositions: anything below them
    embedded                composition of worker and coordinator on one machine
    worker | coordinator    side by side, never importing each other
    storage, migrations     shared storage (tables, sessions, store, job state, broker seam)
    siliconbench            the contract: imports nothing of the project

Inside ``coordinator/`` and ``worker/`` the rooms (sub-packages) have a table of their own (ROOMS): which
rooms each may import, the room graph acyclic, and what some may never reach (statistics: no database and
no broker; reports and reads: no broker; one job's life: no Celery, broker or database).

Two kinds of check: the static graph of every import statement (module level and local alike) must
follow the tables and be acyclic; and each part, imported in a fresh interpreter, must not pull in what it
may not reach indirectly (sys.modules). The static checks are functions of a source tree, so a test can
plant a violation in a copy and see it caught.
"""

from __future__ import annotations

import ast
import functools
import graphlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("siliconbench", "storage", "migrations", "worker", "coordinator", "embedded", "cli", "dashboard")
PROJECT = PACKAGES + ("harness", "tests", "benchmarks")
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
    "harness": set(PACKAGES),
    "tests": set(PACKAGES) | {"harness"},
    "benchmarks": set(PACKAGES) | {"harness"},
}
# Rooms of coordinator/ and worker/: which other rooms of the same package each may import. A module at a
# package's root is a room of its own (coordinator.celery_app).
ROOMS = {
    "coordinator": {
        "stats": set(),
        "history": {"stats"},
        "reports": {"stats", "history"},
        "reads": {"stats", "history", "reports"},
        "fleet": {"stats", "history"},
        "confirm": {"stats", "history", "fleet"},
        "bisection": {"stats", "history", "fleet"},
        "watch": {"stats", "history", "fleet", "bisection"},
        "celery_app": {"watch"},
        "__init__": set(),
    },
    "worker": {
        "platform": set(),
        "models": set(),
        "service": set(),
        "engines": {"platform"},
        "builds": set(),
        "envs": {"platform", "builds"},
        "measure": {"platform", "models"},
        "serving": {"platform", "builds", "engines"},
        "quality": {"engines", "envs"},
        "workloads": {"platform", "builds", "engines", "measure", "models", "quality", "serving"},
        "job": {
            "platform",
            "builds",
            "engines",
            "envs",
            "measure",
            "models",
            "quality",
            "serving",
            "service",
            "workloads",
        },
        "runtime": {
            "platform",
            "builds",
            "engines",
            "envs",
            "measure",
            "models",
            "quality",
            "serving",
            "service",
            "workloads",
            "job",
        },
        "__init__": {"engines"},
    },
}
BROKER = ["celery", "kombu", "redis", "storage.broker"]
DATABASE = ["sqlalchemy", "psycopg", "alembic", "storage"]
# What a room may never import, directly or (checked in a fresh interpreter) through anything it imports.
NEVER = {
    "coordinator.stats": DATABASE + BROKER,
    "coordinator.reports": BROKER,
    "coordinator.reads": BROKER,
    "worker.job": DATABASE + BROKER,
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


def imported_names(path: Path, root: Path = ROOT) -> list[tuple[str, int]]:
    """Absolute module names imported anywhere in the file (relative imports resolved), with line numbers;
    ``from package import module`` counts as importing ``package.module``."""
    package = ".".join(path.relative_to(root).parent.parts)
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((module, node.lineno))
            out += [(f"{module}.{a.name}", node.lineno) for a in node.names if a.name != "*"]
    return out


def package_edges(root: Path = ROOT) -> dict[tuple[str, str], list[str]]:
    """(importer, imported) top-level project packages -> where, from the source of every module."""
    edges: dict[tuple[str, str], list[str]] = {}
    for pkg in PROJECT:
        for path in sorted((root / pkg).rglob("*.py")):
            for name, line in imported_names(path, root):
                top = name.split(".")[0]
                where = f"{path.relative_to(root)}:{line}"
                if top in PROJECT and top != pkg and where not in edges.get((pkg, top), ()):
                    edges.setdefault((pkg, top), []).append(where)
    return edges


def room_of(module: str, root: Path = ROOT) -> str | None:
    """``coordinator.fleet.sweeps`` -> ``coordinator.fleet``; a module at the root is its own room."""
    parts = module.split(".")
    if parts[0] not in ROOMS or len(parts) < 2:
        return None
    if (root / parts[0] / parts[1]).is_dir() or (root / parts[0] / f"{parts[1]}.py").is_file():
        return f"{parts[0]}.{parts[1]}"
    return None


def room_edges(root: Path = ROOT) -> dict[tuple[str, str], list[str]]:
    """(importer room, imported room or forbidden module) -> where, for every module of every room."""
    edges: dict[tuple[str, str], list[str]] = {}
    for pkg in ROOMS:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root)
            mine = room_of(".".join(rel.with_suffix("").parts), root) or f"{pkg}.__init__"
            for name, line in imported_names(path, root):
                other = room_of(name, root)
                targets = [other] if other and other != mine else []
                targets += [n for n in NEVER.get(mine, ()) if name == n or name.startswith(n + ".")]
                for t in targets:
                    if f"{rel}:{line}" not in edges.get((mine, t), ()):
                        edges.setdefault((mine, t), []).append(f"{rel}:{line}")
    return edges


def layer_violations(root: Path = ROOT) -> dict[str, list[str]]:
    """Every import against the package table or the rooms' tables, with where it is; empty when the house holds."""
    broken = {f"{a} -> {b}": where for (a, b), where in package_edges(root).items() if b not in ALLOWED[a]}
    # A test module is never imported: what several share lives in a support module or a conftest.py.
    for path in sorted((root / "tests").rglob("*.py")):
        for name, line in imported_names(path, root):
            if name.startswith("tests.") and name.split(".")[-1].startswith("test_"):
                broken.setdefault(
                    f"{path.relative_to(root).with_suffix('').as_posix().replace('/', '.')} -> {name}", []
                ).append(f"{path.relative_to(root)}:{line}")
    for (a, b), where in room_edges(root).items():
        pkg, room = a.split(".", 1)
        allowed = {f"{pkg}.{r}" for r in ROOMS[pkg].get(room, set())}
        if b not in allowed:
            broken[f"{a} -> {b}"] = where
    return broken


def loaded_after_import(modules: list[str]) -> set[str]:
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted({k.split('.')[0] for k in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@functools.cache  # one parse per module, however many imports name it
def bound_names(path: Path) -> frozenset[str]:
    """Names a module binds at its top level (definitions, assignments, imports), what ``from it import x`` finds."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try)):  # a guarded import or definition binds its names too
            names |= {
                a.asname or a.name.split(".")[0]
                for n in ast.walk(node)
                if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names
            }
            names |= {n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return frozenset(names)


def module_file(name: str, root: Path) -> Path | None:
    base = root.joinpath(*name.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def unresolved_imports(root: Path = ROOT) -> list[str]:
    """Every import of a project module, module level or local, that names no file or no name in one: a move
    that left a caller behind (an import inside a function fails only when that path runs)."""
    broken = []
    for pkg in PROJECT:
        for path in sorted((root / pkg).rglob("*.py")):
            for name, line in imported_names(path, root):
                if name.split(".")[0] not in PROJECT or module_file(name, root):
                    continue
                parent, _, attr = name.rpartition(".")
                owner = module_file(parent, root) if parent else None
                if owner is None or attr not in bound_names(owner):
                    broken.append(f"{path.relative_to(root)}:{line} {name}")
    return sorted(set(broken))


def test_every_project_import_names_something_that_exists():
    broken = unresolved_imports()
    assert not broken, broken


def test_every_import_between_packages_and_rooms_follows_the_layers():
    assert package_edges() and room_edges(), "the project's packages and rooms import each other somewhere"
    broken = layer_violations()
    assert not broken, f"imports against the layers: {broken}"


def test_every_room_is_in_the_table():
    for pkg, rooms in ROOMS.items():
        found = {
            p.name.removesuffix(".py")
            for p in (ROOT / pkg).iterdir()
            if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"
        }
        assert found == set(rooms), f"{pkg}: rooms on disk {sorted(found)}, in the table {sorted(rooms)}"
        for room in rooms:  # each room says what it owns: the newcomer's map
            init = ROOT / pkg / room / "__init__.py"
            if init.exists():
                assert len(ast.get_docstring(ast.parse(init.read_text())) or "") > 80, init


def test_room_graph_is_acyclic():
    graph: dict[str, set[str]] = {}
    for a, b in room_edges():
        if b.split(".")[0] in ROOMS:
            graph.setdefault(a, set()).add(b)
    list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError on a cycle


def test_a_planted_violation_is_caught(tmp_path):
    """A copy of the tree with imports against the rules: statistics reaching the database, a test importing a
    benchmark, one job's life reaching the broker, a test module importing another. Each is reported, naming
    its file and line."""
    for top in PROJECT:
        shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("*.pyc", "__pycache__", "data"))
    assert layer_violations(tmp_path) == {}
    (tmp_path / "coordinator/stats/planted.py").write_text("from storage import database\n")
    (tmp_path / "tests/test_planted.py").write_text("def f():\n    from benchmarks import faults\n")
    (tmp_path / "worker/job/planted.py").write_text("import celery\nfrom worker.runtime import task\n")
    (tmp_path / "tests/storage/test_planted.py").write_text("from tests.storage.test_storage import SPEC\n")
    (tmp_path / "benchmarks/planted.py").write_text("def f():\n    from benchmarks import _moved_away\n")
    assert unresolved_imports(tmp_path) == ["benchmarks/planted.py:2 benchmarks._moved_away"]
    broken = layer_violations(tmp_path)
    assert broken["coordinator.stats -> storage"] == ["coordinator/stats/planted.py:1"]
    assert broken["tests -> benchmarks"] == ["tests/test_planted.py:2"]
    assert broken["worker.job -> worker.runtime"] == ["worker/job/planted.py:2"]
    assert "worker.job -> celery" in broken
    assert broken["tests.storage.test_planted -> tests.storage.test_storage"] == ["tests/storage/test_planted.py:1"]


def test_package_import_graph_is_acyclic():
    graph: dict[str, set[str]] = {p: set() for p in PROJECT}
    for a, b in package_edges():
        graph[a].add(b)
    order = list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError on a cycle
    assert order[0] == "siliconbench" and set(order) == set(PROJECT)


def test_worker_and_coordinator_never_import_each_other():
    edges = package_edges()
    assert ("worker", "coordinator") not in edges and ("coordinator", "worker") not in edges


WORKER_PLUMBING = modules_of("worker", skip=("worker.engines.llama_cpp", "worker.engines.mlx_lm", "worker.models"))


@pytest.mark.parametrize(
    "part, modules, forbidden",
    [
        (
            "siliconbench",
            modules_of("siliconbench"),
            ENGINES + DASHBOARD + ["sqlalchemy", "psycopg", "alembic", "celery"],
        ),
        ("storage", modules_of("storage"), ENGINES + DASHBOARD),
        ("coordinator", modules_of("coordinator"), ENGINES + DASHBOARD),
        ("embedded", modules_of("embedded"), ENGINES + DASHBOARD),
        ("cli", modules_of("cli"), ENGINES + DASHBOARD),
        # The worker's plumbing (not its engine adapters) must import without any engine or dashboard.
        ("worker", WORKER_PLUMBING, ENGINES + DASHBOARD),
        # Rooms that may never reach a database or a broker, even through what they import.
        (
            "coordinator.stats",
            modules_of("coordinator/stats"),
            ENGINES + DASHBOARD + ["sqlalchemy", "psycopg", "celery", "kombu", "redis", "storage"],
        ),
        ("coordinator.reports", modules_of("coordinator/reports"), ENGINES + DASHBOARD + ["celery", "kombu", "redis"]),
        ("coordinator.reads", modules_of("coordinator/reads"), ENGINES + DASHBOARD + ["celery", "kombu", "redis"]),
    ],
)
def test_part_does_not_import(part, modules, forbidden):
    assert modules, part
    loaded = loaded_after_import(modules)
    top = part.split(".")[0]
    project = {p for p in PACKAGES if p not in ALLOWED[top] | {top}}  # what it may not load, even indirectly
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
    out = subprocess.run(
        [sys.executable, "-c", f"import benchmarks.{script}"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
