"""One description per engine (siliconbench/contract/engines.py) is everything the house needs of an engine: each field
resolves to something real in the room that reads it, and no room spells an engine's facts out again."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from siliconbench.contract.engines import ENGINE_NAMES, ENGINES, PACKAGE_ENGINE
from siliconbench.contract.manifest import DEFAULT_PAIRING, ENGINE_FORMAT, FULL_QUANT
from siliconbench.contract.spec import EngineOptions, SweepSpec
from siliconbench.contract.watch_spec import Package

from siliconbench.worker.engines import engine_class
from siliconbench.worker.engines.base import Engine
from siliconbench.worker.serving.servers import SERVERS
from tests.house.files import project_files

ROOT = Path(__file__).resolve().parents[2]


def test_every_description_resolves_in_each_room():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(SweepSpec.model_fields["engines"].default) == set(ENGINE_NAMES) == set(ENGINES)
    for name, d in ENGINES.items():
        cls = engine_class(name)  # the adapter, imported by its module path
        assert issubclass(cls, Engine) and cls.name == name and cls.kv_source, name
        assert d.servers and set(d.servers) <= set(SERVERS), name  # its servers' command lines and batching
        assert d.unnamed_server in d.servers, name  # the server of its jobs from before the choice
        assert d.options in EngineOptions.model_fields, name  # where a sweep holds its options
        assert ENGINE_FORMAT[name] == d.format and d.format in FULL_QUANT and d.format in DEFAULT_PAIRING, name
        assert d.package == d.pinned[0] and all(PACKAGE_ENGINE[p] == name for p in d.pinned), name
        assert set(d.pinned) <= set(Package.__args__), name  # a watch can follow each package it pins
        assert d.extra in extras and d.modules and d.version_source in ("release", "build"), name


# An engine -> package (or module) map written out as a literal: the descriptions are the one place for it.
SPELLED = re.compile(r"""["']llama\.cpp["']\s*:\s*\(?\s*["'](llama-cpp-python|llama_cpp)["']""")


def test_no_room_spells_an_engine_map_again():
    """Frozen migrations keep theirs (they never import live code); everything else reads siliconbench/contract/engines.py."""
    found = []
    for path in project_files(ROOT, (".py",)):
        rel = path.relative_to(ROOT)
        if rel.parts[:2] == ("siliconbench", "migrations") or rel.parts[0] == "tests":
            continue
        found += [f"{rel}:{i}" for i, line in enumerate(path.read_text().splitlines(), 1) if SPELLED.search(line)]
    assert found == []
