"""Confirm a finding before alarming: rerun baseline and candidate interleaved, A/B/A/B, on the same host.

The confirmation is a new sweep of the finding's series only: ``rounds`` rounds (default
``COMPARE_PROCESSES``, as a sweep comparing versions), each running the baseline's engine version then the candidate's in a
fresh process each, with the series' repetitions and seed, so slow drift (thermal throttling, a
neighbour's load) hits both sides alike. Its comparison, by ``compare``'s own statistics with each
process one sample (``siliconbench.coordinator.stats.significance``), is attached to the finding, which becomes
*confirmed* (same verdict as found), *not_confirmed* (equivalent, or the opposite change) or *inconclusive* (the
rerun could not tell: never read as "not reproduced").

Both versions must be runnable here: this interpreter's own engine version, or an engine environment
(``siliconbench env add``) whose recorded packages match the side's. A step where only the OS, Python or
BLAS changed cannot be rerun side by side and is refused with that reason. What a confirmation is, wherever
it runs, is ``siliconbench.coordinator.confirm.plan``'s; through the fleet, ``siliconbench.coordinator.confirm.on_fleet`` runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version as installed_version
from pathlib import Path

from siliconbench.contract.engines import describe
from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import JobSpec, interleave
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.settings import data_dir
from siliconbench.contract.spec import SweepSpec

from siliconbench import import_root
from siliconbench.coordinator.confirm.plan import (
    DEFAULT_ROUNDS,
    check_confirmable,
    check_rounds,
    compare_sides,
    confirm_spec,
    confirm_status,
    same_sides,
    side_result,
    side_version,
)
from siliconbench.coordinator.history.compare import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT
from siliconbench.coordinator.history.load import load_points
from siliconbench.coordinator.history.regressions import finding_dict, get_finding, set_status
from siliconbench.storage import result_store
from siliconbench.storage.database import session_scope
from siliconbench.worker.envs import venvs as envs
from siliconbench.worker.platform.host_facts import host_facts

from .run import run_sweep


def _own(pkg: str) -> str | None:
    try:
        return installed_version(pkg)
    except PackageNotFoundError:
        return None


def version_label(engine: str, components: dict[str, str], envs_root=None) -> str:
    """The engine_version that reruns a side: the package version this interpreter or an environment holds."""
    side_version(engine, components)  # the side must name its engine package's version
    want = {p: components.get(p) for p in describe(engine).pinned if components.get(p)}
    package = describe(engine).package
    if all(_own(p) == v for p, v in want.items()):
        return want[package]
    for e in envs.list_envs(envs_root):
        if e.engine == engine and e.ok() and all(e.packages.get(p) == v for p, v in want.items()):
            return e.name if e.name != f"{package}-{e.version}" else e.version
    pins = " ".join(f"--with '{p}=={v}'" for p, v in want.items() if p != package)
    raise UserError(
        "FINDING",
        f"no engine environment on this host holds {', '.join(f'{p} {v}' for p, v in want.items())}; "
        f"run `siliconbench env add {package}=={want[package]}{(' ' + pins) if pins else ''}` first.",
    )


def plan_confirm(
    finding, before: JobSpec, catalog: ModelCatalog, *, rounds: int, repetitions: int | None, envs_root=None
) -> tuple[SweepSpec, list[JobSpec], str, str]:
    """The confirmation sweep and its jobs (interleaved), with the baseline and candidate labels."""
    check_rounds(rounds)
    check_confirmable(finding, before)
    base = version_label(finding.engine, finding.before, envs_root)
    cand = version_label(finding.engine, finding.after, envs_root)
    same_sides(finding, base, cand)
    m = catalog.get(before.model, field="FINDING")
    art = next((a for a in m.artifacts if a.sha256 == before.model_sha256), None)
    if art is None:
        raise UserError(
            "FINDING",
            f"the models folder {catalog.models_dir} has no artifact of {before.model} with "
            f"digest {before.model_sha256[:12]} (the series' model).",
        )
    spec = confirm_spec(finding, before, rounds=rounds, repetitions=repetitions, base=base, cand=cand)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    sweep_id = f"confirm-{finding.id}-{stamp}"
    template = before.model_copy(
        update=dict(
            job_id="",
            sweep_id=sweep_id,
            sweep_name=spec.name,
            repetitions=spec.repetitions,
            host=None,
            artifact=before.artifact,
        )
    )
    # A/B/A/B, as expand interleaves versions: each round the baseline first, the candidate right after.
    return spec, interleave([template], rounds, {finding.engine: [base, cand]}), base, cand


def run_confirm(
    url: str,
    finding_id: int,
    models_dir: Path,
    *,
    rounds: int = DEFAULT_ROUNDS,
    repetitions: int | None = None,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    on_event=None,
    on_done=None,
    envs_root=None,
) -> dict:
    """Run the confirmation sweep of a finding on this host and attach its comparison; the finding's dict."""
    with session_scope(url) as s:
        f = get_finding(s, finding_id)
        host = host_facts()["hostname"]
        if f.host and f.host != host:
            raise UserError(
                "FINDING",
                f"finding {finding_id} was measured on host {f.host!r}; this is {host!r}. "
                "Run `siliconbench confirm` there: only the same host can confirm it.",
            )
        stored = result_store.load_stored(s, job_ids=[f.before_job_id])
        if not stored:
            raise UserError("FINDING", f"the result before the step ({f.before_job_id}) is no longer stored.")
        spec, jobs, base, cand = plan_confirm(
            f, stored[0].job, ModelCatalog(models_dir), rounds=rounds, repetitions=repetitions, envs_root=envs_root
        )
        metric, previous = f.metric, f.status
        set_status(s, finding_id, "confirming")
    try:
        sweep_id = run_sweep(spec, jobs, database_url=url, models_dir=models_dir, on_event=on_event, on_done=on_done)
    except BaseException:
        with session_scope(url) as s:
            set_status(s, finding_id, previous)
        raise
    with session_scope(url) as s:
        ended_ok = load_points(s, sweep_id, include_disturbed=True)
        pts = [p for p in ended_ok if not p.disturbed]
        comp = compare_sides(pts, base, cand, metric, alpha=alpha, min_effect=min_effect)
        f = get_finding(s, finding_id)
        result = side_result(
            comp,
            base=base,
            cand=cand,
            rounds=rounds,
            n_jobs=len(jobs),
            n_ok=len(ended_ok),
            n_clean=len(pts),
            sweep_id=sweep_id,
        )
        status = confirm_status(comp.verdict.value, f.verdict)
        set_status(s, finding_id, status, confirm_sweep_id=sweep_id, confirm_result=result)
        return finding_dict(get_finding(s, finding_id))


def start_background(finding_id: int, *, rounds: int = DEFAULT_ROUNDS, log_dir: Path | None = None) -> int:
    """Start `siliconbench confirm FINDING` as a detached process (the dashboard's button); its pid."""
    log_dir = log_dir or data_dir() / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / f"confirm-{finding_id}.log", "ab")
    root = import_root()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "siliconbench.cli.main", "confirm", str(finding_id), "--rounds", str(rounds)],
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=root,
        start_new_session=True,
    )
    log.close()
    return proc.pid
