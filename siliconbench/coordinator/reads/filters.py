"""The Compare page's filters and the SQL conditions they become, shared by every dashboard read query.

Each filter is a column with an index (0007): job columns (model, engine, quant, workload, lengths), the
results row's host, chip and engine version (stored as a column when the result is written, not parsed
from the environment JSON per row), and the sweep. Only the platform's identity facts (Mac model, GPU
cores), rarely used, are still read from the environment JSON.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import or_, select

from siliconbench.contract.metrics import HEADLINE

from siliconbench.storage.tables import Job, Result

SAMPLE_METRICS = HEADLINE + ("decode_bandwidth_pct",)  # the Compare page's metrics kept as samples
MAX_SERIES = 100  # series per Compare view: more is unreadable as bars, and it bounds every query's work
MAX_RAW_SAMPLES = 20_000  # the distribution plot's cap; the aggregates never use it


@dataclass(frozen=True)
class Filters:
    """What the Compare page narrows results by; an empty tuple means "any"."""

    sweeps: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    chips: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    quants: tuple[str, ...] = ()  # an exact quantization (Q4_K_M) or a level (q4)
    engines: tuple[str, ...] = ()
    engine_versions: tuple[str, ...] = ()
    workloads: tuple[str, ...] = ()
    n_prompt: tuple[int, ...] = ()
    n_gen: tuple[int, ...] = ()
    n_depth: tuple[int, ...] = ()
    mac_models: tuple[str, ...] = ()  # hw.model, e.g. Mac14,12 (environment.host_details)
    gpu_cores: tuple[int, ...] = ()  # what binned Apple chips differ in
    include_disturbed: bool = False  # disturbed results (throttled or contended: JobResult.disturbed) are left out


def engine_version():
    """The engine package's version (llama-cpp-python / mlx-lm) the result ran with (results.engine_version)."""
    return Result.engine_version


def host_detail(key: str, as_int: bool = False):
    """One of the platform's identity facts from the stored environment (environment.host_details)."""
    path = Result.environment[("host_details", key)]
    return path.as_integer() if as_int else path.as_string()


COLUMNS = {
    "sweeps": Job.sweep_id,
    "hosts": Result.hostname,
    "chips": Result.chip,
    "models": Job.model,
    "engines": Job.engine,
    "workloads": Job.workload,
    "n_prompt": Job.n_prompt,
    "n_gen": Job.n_gen,
    "n_depth": Job.n_depth,
}
JOB_FILTERS = (
    "sweeps",
    "models",
    "quants",
    "engines",
    "workloads",
    "n_prompt",
    "n_gen",
    "n_depth",
)  # the filters on jobs columns; hosts, chips and engine versions are on results


def conditions(f: Filters, result_level: bool = True) -> list:
    """The filters as SQL conditions; ``result_level=False`` leaves out the one fact of a result rather than
    of its identity (disturbed), for conditions checked on an identity's representative result."""
    conds = [col.in_(getattr(f, name)) for name, col in COLUMNS.items() if getattr(f, name)]
    if f.quants:
        conds.append(or_(Job.quant.in_(f.quants), Job.quant_level.in_(f.quants)))
    if f.engine_versions:
        conds.append(engine_version().in_(f.engine_versions))
    if f.mac_models:
        conds.append(host_detail("model").in_(f.mac_models))
    if f.gpu_cores:
        conds.append(host_detail("gpu_cores", as_int=True).in_(f.gpu_cores))
    if result_level and not f.include_disturbed:
        conds.append(Result.disturbed.is_not(True))  # unknown (None) is kept: most hosts cannot tell
    return conds


def ok_results(f: Filters, identities=None):
    """job_id and identity (k) of the ok results matching ``f`` (and among ``identities`` if given)."""
    q = (
        select(Result.job_id, Result.identity_hash.label("k"))
        .join(Job, Job.id == Result.job_id)
        .where(Result.status == "ok", *conditions(f))
    )
    return q if identities is None else q.where(Result.identity_hash.in_(identities))


def left_out_note(counts: dict[str, int], included: bool, show: str = "tick “Include disturbed results”") -> str:
    """What a view leaves out and why, for beside the control that shows them (``show``: how): "" when nothing is
    left out."""
    n = counts.get("disturbed", 0)
    if not n:
        return ""
    why = ", ".join(f"{counts[k]} {k}" for k in ("throttled", "contended") if counts.get(k))
    if included:
        return f"Includes {n} disturbed result{'s' if n != 1 else ''} ({why})."
    return (
        f"{n} disturbed result{'s' if n != 1 else ''} left out ({why}: the host was hot or busy while "
        f"{'they' if n != 1 else 'it'} ran); {show} to show "
        f"{'them' if n != 1 else 'it'}."
    )
