"""Import rules of the house, the layers of docs/layout.md. The product is one installed package, ``siliconbench``;
its parts are its sub-packages (``siliconbench.worker``, ...), and three folders beside it are never installed:

    tests | benchmarks      each may import the harness and the project, never each other
    harness                 real processes and tools both use: anything of the project
    cli, dashboard          compositions: anything below them (``python -m siliconbench`` is the cli's)
    embedded                composition of worker and coordinator on one machine
    worker | coordinator    side by side, never importing each other
    storage, migrations     shared storage (tables, sessions, store, job state, broker seam)
    commits                 a llama.cpp checkout read with git (builds and the tags watch): no third-party package
    contract                imports nothing of the project (nor does ``siliconbench/__init__.py``, counted with it)

Inside ``siliconbench/coordinator/`` and ``siliconbench/worker/`` the rooms (sub-packages) have a table of their own (ROOMS): which
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
TOPS = ("siliconbench", "harness", "tests", "benchmarks")  # the folders at the checkout's root that hold Python
PARTS = ("contract", "commits", "storage", "migrations", "worker", "coordinator", "embedded", "cli", "dashboard")
PACKAGES = tuple(f"siliconbench.{p}" for p in PARTS)
PROJECT = PACKAGES + ("harness", "tests", "benchmarks")


def full(part: str) -> str:
    return part if part in PROJECT else f"siliconbench.{part}"


# Which parts each part may import (itself always).
ALLOWED = {
    full(a): {full(b) for b in bs}
    for a, bs in {
        "contract": set(),
        "commits": {"contract"},
        "storage": {"contract"},
        "migrations": {"contract", "storage"},
        "worker": {"contract", "commits", "storage"},
        "coordinator": {"contract", "commits", "storage"},
        "embedded": {"contract", "commits", "storage", "worker", "coordinator"},
        "cli": {"contract", "commits", "storage", "worker", "coordinator", "embedded"},
        "dashboard": {"contract", "commits", "storage", "worker", "coordinator", "embedded"},
        "harness": set(PACKAGES),
        "tests": set(PACKAGES) | {"harness"},
        "benchmarks": set(PACKAGES) | {"harness"},
    }.items()
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
BROKER = ["celery", "kombu", "redis", "siliconbench.storage.broker"]
DATABASE = ["sqlalchemy", "psycopg", "alembic", "siliconbench.storage"]
# What a room may never import, directly or (checked in a fresh interpreter) through anything it imports.
NEVER = {
    "siliconbench.coordinator.stats": DATABASE + BROKER,
    "siliconbench.coordinator.reports": BROKER,
    "siliconbench.coordinator.reads": BROKER,
    "siliconbench.worker.job": DATABASE + BROKER,
}
ENGINES = ["llama_cpp", "mlx", "mlx_lm"]
DASHBOARD = ["streamlit", "altair", "playwright"]


def module_name(path: Path, root: Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def part_of(module: str) -> str | None:
    """The part a module belongs to: ``siliconbench.worker.job.child`` -> ``siliconbench.worker``. The package's
    own ``__init__`` counts with the contract (it imports nothing), its ``__main__`` with the cli."""
    if module == "siliconbench":
        return "siliconbench.contract"
    if module == "siliconbench.__main__":
        return "siliconbench.cli"
    return next((p for p in PROJECT if module == p or module.startswith(p + ".")), None)


def python_files(root: Path = ROOT) -> list[Path]:
    return [p for top in TOPS for p in sorted((root / top).rglob("*.py"))]


def modules_of(part: str, skip: tuple[str, ...] = ()) -> list[str]:
    """Every module of a part or room (``siliconbench.coordinator.stats``), for importing in a fresh interpreter."""
    out = []
    for p in python_files():
        name = module_name(p)
        if (name == part or name.startswith(part + ".")) and not any(name.startswith(s) for s in skip):
            if "__main__" not in name:
                out.append(name)
    return out


def imported_names(path: Path, root: Path = ROOT) -> list[tuple[str, int]]:
    """Absolute module names imported anywhere in the file (relative imports resolved), with line numbers;
    ``from package import module`` counts as importing ``package.module``."""
    package = ".".join(path.relative_to(root).parent.parts)  # what a relative import starts from
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
    """(importer, imported) parts of the project -> where, from the source of every module."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in python_files(root):
        mine = part_of(module_name(path, root))
        for name, line in imported_names(path, root):
            other = part_of(name)
            where = f"{path.relative_to(root)}:{line}"
            if other and other != mine and where not in edges.get((mine, other), ()):
                edges.setdefault((mine, other), []).append(where)
    return edges


def room_of(module: str, root: Path = ROOT) -> str | None:
    """``siliconbench.coordinator.fleet.sweeps`` -> ``siliconbench.coordinator.fleet``; a module at the part's
    root is its own room."""
    parts = module.split(".")
    if parts[0] != "siliconbench" or len(parts) < 3 or parts[1] not in ROOMS:
        return None
    folder = root / "siliconbench" / parts[1]
    if (folder / parts[2]).is_dir() or (folder / f"{parts[2]}.py").is_file():
        return ".".join(parts[:3])
    return None


def room_edges(root: Path = ROOT) -> dict[tuple[str, str], list[str]]:
    """(importer room, imported room or forbidden module) -> where, for every module of every room."""
    edges: dict[tuple[str, str], list[str]] = {}
    for pkg in ROOMS:
        for path in sorted((root / "siliconbench" / pkg).rglob("*.py")):
            rel = path.relative_to(root)
            mine = room_of(module_name(path, root), root) or f"siliconbench.{pkg}.__init__"
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
        _, pkg, room = a.split(".", 2)
        allowed = {f"siliconbench.{pkg}.{r}" for r in ROOMS[pkg].get(room, set())}
        if b not in allowed:
            broken[f"{a} -> {b}"] = where
    return broken


def loaded_after_import(modules: list[str]) -> set[str]:
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    # Each module as its part (siliconbench.storage) and as its top-level name (sqlalchemy), what the tables name.
    return {part_of(m) or m.split(".")[0] for m in loaded} | {m for m in loaded if m.startswith("siliconbench.")}


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
    for path in python_files(root):
        for name, line in imported_names(path, root):
            if name.split(".")[0] not in TOPS or module_file(name, root):
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
            for p in (ROOT / "siliconbench" / pkg).iterdir()
            if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"
        }
        assert found == set(rooms), f"{pkg}: rooms on disk {sorted(found)}, in the table {sorted(rooms)}"
        for room in rooms:  # each room says what it owns: the newcomer's map
            init = ROOT / "siliconbench" / pkg / room / "__init__.py"
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
    for top in TOPS:
        shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("*.pyc", "__pycache__", "data"))
    assert layer_violations(tmp_path) == {}
    (tmp_path / "siliconbench/coordinator/stats/planted.py").write_text("from siliconbench.storage import database\n")
    (tmp_path / "tests/test_planted.py").write_text("def f():\n    from benchmarks import faults\n")
    (tmp_path / "siliconbench/worker/job/planted.py").write_text(
        "import celery\nfrom siliconbench.worker.runtime import task\n"
    )
    (tmp_path / "tests/storage/test_planted.py").write_text("from tests.storage.test_storage import SPEC\n")
    (tmp_path / "benchmarks/planted.py").write_text("def f():\n    from benchmarks import _moved_away\n")
    assert unresolved_imports(tmp_path) == ["benchmarks/planted.py:2 benchmarks._moved_away"]
    broken = layer_violations(tmp_path)
    assert broken["siliconbench.coordinator.stats -> siliconbench.storage"] == [
        "siliconbench/coordinator/stats/planted.py:1"
    ]
    assert broken["tests -> benchmarks"] == ["tests/test_planted.py:2"]
    assert broken["siliconbench.worker.job -> siliconbench.worker.runtime"] == ["siliconbench/worker/job/planted.py:2"]
    assert "siliconbench.worker.job -> celery" in broken
    assert broken["tests.storage.test_planted -> tests.storage.test_storage"] == ["tests/storage/test_planted.py:1"]


def test_package_import_graph_is_acyclic():
    graph: dict[str, set[str]] = {p: set() for p in PROJECT}
    for a, b in package_edges():
        graph[a].add(b)
    order = list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError on a cycle
    assert set(order[:2]) == {"siliconbench.contract", "siliconbench.commits"} and set(order) == set(PROJECT)


def test_worker_and_coordinator_never_import_each_other():
    edges = package_edges()
    worker, coordinator = "siliconbench.worker", "siliconbench.coordinator"
    assert (worker, coordinator) not in edges and (coordinator, worker) not in edges


WORKER_PLUMBING = modules_of(
    "siliconbench.worker",
    skip=("siliconbench.worker.engines.llama_cpp", "siliconbench.worker.engines.mlx_lm", "siliconbench.worker.models"),
)


@pytest.mark.parametrize(
    "part, modules, forbidden",
    [
        (
            "siliconbench.contract",
            ["siliconbench"] + modules_of("siliconbench.contract"),
            ENGINES + DASHBOARD + ["sqlalchemy", "psycopg", "alembic", "celery"],
        ),
        # git's answers need no third-party package: a worker with nothing but the contract reads a checkout.
        ("siliconbench.commits", modules_of("siliconbench.commits"), ENGINES + DASHBOARD + ["pydantic", "sqlalchemy"]),
        ("siliconbench.storage", modules_of("siliconbench.storage"), ENGINES + DASHBOARD),
        ("siliconbench.coordinator", modules_of("siliconbench.coordinator"), ENGINES + DASHBOARD),
        ("siliconbench.embedded", modules_of("siliconbench.embedded"), ENGINES + DASHBOARD),
        ("siliconbench.cli", modules_of("siliconbench.cli"), ENGINES + DASHBOARD),
        # The worker's plumbing (not its engine adapters) must import without any engine or dashboard.
        ("siliconbench.worker", WORKER_PLUMBING, ENGINES + DASHBOARD),
        # Rooms that may never reach a database or a broker, even through what they import.
        (
            "siliconbench.coordinator.stats",
            modules_of("siliconbench.coordinator.stats"),
            ENGINES + DASHBOARD + ["sqlalchemy", "psycopg", "celery", "kombu", "redis", "siliconbench.storage"],
        ),
        (
            "siliconbench.coordinator.reports",
            modules_of("siliconbench.coordinator.reports"),
            ENGINES + DASHBOARD + ["celery", "kombu", "redis"],
        ),
        (
            "siliconbench.coordinator.reads",
            modules_of("siliconbench.coordinator.reads"),
            ENGINES + DASHBOARD + ["celery", "kombu", "redis"],
        ),
    ],
)
def test_part_does_not_import(part, modules, forbidden):
    assert modules, part
    loaded = loaded_after_import(modules)
    top = part_of(part)
    project = {p for p in PACKAGES if p not in ALLOWED[top] | {top}}  # what it may not load, even indirectly
    leaked = loaded & (set(forbidden) | project)
    assert not leaked, f"{part} imports {sorted(leaked)}"


def test_nothing_outside_dashboard_imports_streamlit():
    offenders = []
    for p in ROOT.rglob("*.py"):
        rel = p.relative_to(ROOT)
        if rel.parts[:2] == ("siliconbench", "dashboard") or rel.parts[0] in (".venv", "tests", "build"):
            continue
        if "site-packages" in rel.parts:
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
