"""A campaign's two sides: the baseline (the last version with history) and the hosts it runs on.

*History* means ok results of the engine that ran with that version of the package: the results'
``engine_version`` column for the engine's own package (mlx-lm, llama-cpp-python), the environment's recorded
packages for another one (the mlx core under mlx-lm), the jobs' engine version for a llama.cpp tag (a build is
named by its tag). Versions are ordered as ``watch_spec.version_key`` orders them (tags by build number). With no earlier version measured yet, the newest earlier
version the watch has seen is the baseline, and the campaign's ``verdicts["baseline_reason"]`` says which rule
chose it.
"""

from __future__ import annotations

from functools import partial

from sqlalchemy import select
from sqlalchemy.orm import Session

from siliconbench.contract.engines import ENGINE_PACKAGE
from siliconbench.contract.watch_spec import LLAMA_CPP, WatchSpec, version_key

from siliconbench.coordinator.fleet.placement import select_hosts
from siliconbench.coordinator.fleet.sweeps import host_views
from siliconbench.storage.tables import Job, Result

BASELINE_REASON = "baseline_reason"  # the note's top-level key in Campaign.verdicts, beside the campaign driver's


def versions_with_history(session: Session, engine: str, package: str, among: list[str]) -> set[str]:
    """Which of ``among`` have ok results of ``engine`` recorded with that version of ``package`` (llama.cpp's
    tags: results of jobs that named the tag as their engine version)."""
    if not among:
        return set()
    if package == LLAMA_CPP:
        col = Job.spec["engine_version"].as_string()
    elif ENGINE_PACKAGE.get(engine) == package:
        col = Result.engine_version  # indexed (0007)
    else:
        col = Result.environment["packages"][package].as_string()
    q = (
        select(col)
        .distinct()
        .select_from(Result)
        .join(Job, Job.id == Result.job_id)
        .where(Job.engine == engine, Result.status == "ok", col.in_(among))
    )
    return {v for v in session.scalars(q) if v}


def choose_baseline(
    session: Session, engine: str, package: str, candidate: str, seen: list[str]
) -> tuple[str, str] | None:
    """(baseline, reason) for ``candidate`` among the versions the watch has seen; None when none is older."""
    key = partial(version_key, package)
    older = sorted((v for v in seen if key(v)[0] == 1 and key(v) < key(candidate)), key=key, reverse=True)
    if not older:
        return None
    measured = versions_with_history(session, engine, package, older)
    for v in older:
        if v in measured:
            return v, f"{package} {v}: the newest earlier version with ok results of {engine}"
    return older[0], (
        f"{package} {older[0]}: no earlier version has results of {engine} yet, so the newest earlier "
        "version the watch has seen"
    )


def target_hosts(session: Session, spec: WatchSpec, engine: str) -> list[str]:
    """Sorted names of the online hosts the watch's selector matches that offer ``engine`` (placement would
    refuse the engine's jobs elsewhere). A listed name not registered yet is simply not a target."""
    hosts = host_views(session)
    selector = spec.host_selector
    if isinstance(selector, list):
        chosen = [h for h in hosts if h.name in selector]
    else:
        chosen = select_hosts(spec.suite_spec, hosts)
    return sorted(h.name for h in chosen if h.online and engine in h.engines)
