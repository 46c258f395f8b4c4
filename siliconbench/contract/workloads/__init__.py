"""Workload kinds, one module each (its sweep settings, how it expands into job configurations, the facts its results
carry), registered once in KINDS below; each is run by the worker module of the same name (siliconbench/worker/workloads/<kind>.py)
and its metrics are defined in siliconbench/contract/metrics.py. Adding a kind: a module here, its line in MODULES, its
worker module, its metrics.

Settings that need the model (a depth beyond its context, a swap target it lacks) are checked by ``configs`` at
expansion and raise UserError naming the field. What only a run can tell (a port in use, a server that never becomes
ready) becomes a failed job with the reason instead.
"""

from __future__ import annotations

from types import ModuleType

from pydantic import BaseModel

from . import concurrent, generate, long_context, multiprocess, perplexity, restart, serve, swap
from .base import COMMON_FACTS, CTX_SLACK, Config, ServerSettings
from .concurrent import ConcurrentWorkload
from .generate import GenerateWorkload
from .long_context import LongContextWorkload
from .multiprocess import MultiprocessWorkload
from .perplexity import PerplexityMode, PerplexityWorkload, kld_bases
from .restart import RestartWorkload
from .serve import ServeWorkload
from .swap import SwapWorkload

MODULES: tuple[ModuleType, ...] = (generate, swap, restart, concurrent, serve, long_context, perplexity, multiprocess)


def _settings_class(module: ModuleType) -> type[BaseModel]:
    return next(
        v
        for v in vars(module).values()
        if isinstance(v, type) and issubclass(v, BaseModel) and "kind" in v.model_fields
    )


KIND_MODULES: dict[str, ModuleType] = {m.__name__.rsplit(".", 1)[1]: m for m in MODULES}
KINDS: dict[str, type[BaseModel]] = {kind: _settings_class(m) for kind, m in KIND_MODULES.items()}
FACTS: dict[str, frozenset[str]] = {kind: m.FACTS for kind, m in KIND_MODULES.items()}
LABELS: dict[str, tuple[str, ...]] = {kind: getattr(m, "LABEL", ()) for kind, m in KIND_MODULES.items()}
assert all(KINDS[k].model_fields["kind"].default == k for k in KINDS), "a kind's module is named after its kind"


def n_configs(w) -> int:
    """Upper bound of a workload's configurations, for the max_jobs check before expanding."""
    return KIND_MODULES[w.kind].n_configs(w)


def configs(w, wi: int, m, catalog, engines: list[str]) -> list[Config]:
    """The configurations of workload ``w`` (``workloads[wi]``) on model ``m``; UserError for impossible ones."""
    return KIND_MODULES[w.kind].configs(w, f"workloads[{wi}]", m, catalog, engines)


def least_duration_s(job) -> tuple[float | None, str]:
    """(seconds a job of its kind cannot take less than, the setting that decides it), where its kind knows one."""
    own = getattr(KIND_MODULES.get(job.workload), "least_duration_s", None)
    return own(job) if own else (None, "")


def check_job(job, at: str) -> None:
    """UserError naming ``at``'s field for a job its kind cannot run as asked (known only once the job is whole)."""
    own = getattr(KIND_MODULES.get(job.workload), "check_job", None)
    if own:
        own(job, at)


def notices(jobs) -> list[str]:
    """What a user should read before the jobs run that is not an error (a prompt file the runs repeat), each once."""
    out: list[str] = []
    for job in jobs:
        own = getattr(KIND_MODULES.get(job.workload), "notice", None)
        text = own(job) if own else None
        if text and text not in out:
            out.append(text)
    return out


def engine_params(
    w,
    wi: int,
    cfg: Config,
    engine: str,
    model: str,
    art,
    catalog,
    full: tuple[str, bool] | None = None,
    engines: tuple[str, ...] = (),
) -> dict | None:
    """The job's params on ``engine`` with artifact ``art``, or None when the configuration does not apply to it;
    a kind without its own ``engine_params`` runs every configuration on every engine alike."""
    own = getattr(KIND_MODULES[w.kind], "engine_params", None)
    if own is None:
        return cfg.params
    return own(w, f"workloads[{wi}]", cfg, engine, model, art, catalog, full=full, engines=engines)


__all__ = [
    "COMMON_FACTS",
    "CTX_SLACK",
    "Config",
    "ConcurrentWorkload",
    "FACTS",
    "GenerateWorkload",
    "KINDS",
    "KIND_MODULES",
    "LABELS",
    "LongContextWorkload",
    "MultiprocessWorkload",
    "PerplexityMode",
    "PerplexityWorkload",
    "RestartWorkload",
    "ServeWorkload",
    "ServerSettings",
    "SwapWorkload",
    "check_job",
    "configs",
    "engine_params",
    "kld_bases",
    "least_duration_s",
    "n_configs",
    "notices",
]
