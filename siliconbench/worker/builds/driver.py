"""In a job's child: which llama.cpp build the job runs, and through what — the binding or the build's llama-bench.

The worker names the build in ``SILICONBENCH_LLAMA_BUILD`` (its out folder, ``compile``); no variable means the
llama.cpp that llama-cpp-python ships. The sweep's ``llama.cpp.driver`` option chooses the path:

- ``auto`` (the default): the binding where the build's ``llama.h`` declares everything the binding calls as the
  binding expects (``header.check``), the build's llama-bench otherwise;
- ``binding``: the binding or a refusal naming the first declaration that differs — never a binding on a
  mismatched library;
- ``llama-bench``: always the build's own tool (a bisection measures every commit of its range this way).

The path taken is recorded as the effective ``engine_options.driver`` and ``engine_build.measured_by``, so results
of the two paths are never pooled.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from siliconbench.contract.errors import WorkloadError
from siliconbench.contract.settings import env_setting

from siliconbench.worker.builds import header
from siliconbench.worker.builds.compile import Build

DRIVERS = ("auto", "binding", "llama-bench")


def current() -> Build | None:
    """The build this process was started for, if any."""
    path = env_setting("llama_build")
    if not path:
        return None
    record = Path(path) / "build.json"
    if not record.exists():
        raise WorkloadError(f"SILICONBENCH_LLAMA_BUILD={path} holds no build.json: not a siliconbench build")
    return Build(**json.loads(record.read_text()))


def compatibility(build: Build) -> header.Compatibility:
    """The header check of ``build`` against this interpreter's binding, kept beside the build once made."""
    binding = header.own_binding_version() or "none"
    kept = Path(build.path) / f"binding-{binding}.json"
    if kept.exists():
        d = json.loads(kept.read_text())
        return header.Compatibility(
            d["binding"], d["compatible"], d["declarations_checked"], d["first_difference"], d["declarations_differing"]
        )
    found = header.check(build.header)
    tmp = kept.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(found.as_dict(), indent=2) + "\n")
    tmp.replace(kept)
    return found


def choose(build: Build | None, asked: str) -> str:
    """The path a job takes: "wheel" (no build), "binding" or "llama-bench"; WorkloadError where it cannot run."""
    if asked not in DRIVERS:
        raise WorkloadError(f"llama.cpp.driver {asked!r}: use one of {', '.join(DRIVERS)}")
    if build is None:
        if asked == "llama-bench":
            raise WorkloadError(
                "llama.cpp.driver 'llama-bench' measures a llama.cpp build: name one in engine_versions "
                "(`siliconbench env add llama.cpp --source DIR --ref REF`)"
            )
        return "wheel"
    if asked == "llama-bench":
        return "llama-bench"
    compat = compatibility(build)
    if compat.ok:
        return "binding"
    if asked == "binding":
        raise WorkloadError(
            f"llama-cpp-python {compat.binding} cannot drive the build {build.rev.label}: {compat.first_difference} "
            f"({compat.differing} of {compat.checked} declarations differ). Use driver 'auto' or 'llama-bench' to "
            "measure it through its own llama-bench."
        )
    return "llama-bench"


def prepare(options: dict) -> tuple[Build | None, str]:
    """Decide the job's path before llama_cpp is imported; for the binding, point it at the build's library."""
    build = current()
    path = choose(build, options.get("driver", "auto"))
    if path == "binding":
        os.environ["LLAMA_CPP_LIB_PATH"] = str(build.bin_dir)
    return build, path


def facts(build: Build, path: str, described: dict) -> dict:
    """An engine's ``describe()`` with the build's record: the commit, build number, describe, compiler, flags,
    the backend it was built for, what measured it and (through the binding) the binding's version."""
    rev = build.rev
    engine_build = dict(described.get("engine_build") or {})
    engine_build.update(
        {
            "commit": rev.sha,
            "build_number": str(rev.number) if rev.number is not None else "",
            "describe": rev.describe,
            "subject": rev.subject,
            "compiler": build.compiler,
            "cmake_flags": " ".join(build.cmake_flags),
            "built_for": build.backend,
            "measured_by": path,
        }
    )
    if path == "binding":
        engine_build["binding"] = (described.get("packages") or {}).get("llama-cpp-python", "")
    options = {**(described.get("engine_options") or {}), "driver": path}
    return {**described, "engine_build": engine_build, "engine_options": options}
