"""The sweeps a bisection measures with, for both ways of running one (``siliconbench.embedded.bisect`` on this machine,
``siliconbench.coordinator.watch.bisections`` on the fleet): a finding's series as a sweep (every engine option of its series
key), one look of a step, and the sweep and commits that bisect a confirmed finding (``regressions bisect
--finding``).

Every commit of a step is measured through its own llama-bench (``llama.cpp.driver: llama-bench``): most commits
of a real range match no llama-cpp-python binding, and one path for all keeps the steps comparable. A finding
measured through the binding is therefore re-measured another way; ``through`` says which, and the search says
"not reproduced through llama-bench" (never "no regression") when its ends do not show it.
"""

from __future__ import annotations

from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.spec import SweepSpec

from siliconbench.coordinator.history.regressions import get_finding
from siliconbench.storage import result_store
from siliconbench.storage.database import session_scope

ENGINE = "llama.cpp"
MEASURED = ("decode_tps", "prefill_tps")  # what a build's llama-bench measures (siliconbench/worker/builds/tool.py)
THROUGH = "llama-bench"  # how every commit of a bisection is measured
NOT_OPTIONS = ("threads", "driver")  # threads is the sweep's own field; the driver is the bisection's (THROUGH)


def measured_through(result) -> str:
    """How a stored result was measured: a build's llama-bench, else the binding (a package's or a build's)."""
    env = result.environment
    return ((env.engine_build if env else None) or {}).get("measured_by") or "binding"


def series_options(job: JobSpec) -> dict:
    """The llama.cpp options of ``job``'s series (flash_attn, type_k/type_v, n_batch/n_ubatch, n_gpu_layers,
    use_mmap, ...): all that its series key holds, which the build's llama-bench honours."""
    return {k: v for k, v in (job.engine_options or {}).items() if k not in NOT_OPTIONS}


def series_sweep(job: JobSpec, name: str) -> dict:
    """The sweep (a document) that measures ``job``'s series again: its model, level, lengths, repetitions,
    warm-up, seed, threads and every llama.cpp option, on llama.cpp."""
    return {
        "name": name,
        "models": [job.model],
        "engines": [ENGINE],
        "quantizations": [job.quant],
        "workloads": [
            {"kind": "generate", "prompt_tokens": [job.n_prompt], "gen_tokens": [job.n_gen], "depth": [job.n_depth]}
        ],
        "repetitions": job.repetitions,
        "warmup": job.warmup,
        "seed": job.seed,
        "engine_options": {"threads": job.engine_options.get("threads"), ENGINE: series_options(job)},
    }


def step_spec(spec: SweepSpec | dict, labels: list[str], processes: int, name: str, **more) -> SweepSpec:
    """One step: ``labels`` (build versions) interleaved, ``processes`` a side, through each build's llama-bench;
    ``more`` sets further fields (the fleet's hosts and placement)."""
    data = spec.model_dump(mode="json", by_alias=True) if isinstance(spec, SweepSpec) else dict(spec)
    data.update(
        name=name,
        engines=[ENGINE],
        engine_versions={ENGINE: labels},
        processes=processes,
        install_versions=False,
        version_order="rotate",  # A B C, B C A, C A B: drift and a round's position fall on every side alike
        **more,
    )
    options = dict(data.get("engine_options") or {})
    options[ENGINE] = {**(options.get(ENGINE) or {}), "driver": "llama-bench"}
    data["engine_options"] = options
    return SweepSpec.model_validate(data)


def finding_sweep(database_url: str, finding_id: int) -> tuple[SweepSpec, str, str, str, str]:
    """(sweep, good ref, bad ref, metric, the path the finding was measured through) that bisect a confirmed
    llama.cpp regression: the finding's series' configuration, and the llama.cpp commits its two sides ran."""
    field = "--finding"
    with session_scope(database_url) as s:
        f = get_finding(s, finding_id)
        if f.engine != ENGINE or f.verdict != "regression":
            raise UserError(
                field,
                f"finding {finding_id} is a {f.verdict} of {f.engine}; a bisection follows a llama.cpp regression.",
            )
        if f.status != "confirmed":
            raise UserError(
                field,
                f"finding {finding_id} is {f.status}: confirm it first (`siliconbench confirm {finding_id}`), "
                "a bisection starts from a confirmed regression.",
            )
        good, bad = (f.before or {}).get(ENGINE), (f.after or {}).get(ENGINE)
        if not good or not bad or good == bad:
            raise UserError(
                field,
                f"the finding's sides ran llama.cpp {good or '?'} and {bad or '?'}: no llama.cpp commits to "
                f"bisect between (what changed there: {', '.join(f.changes or {}) or 'nothing recorded'}).",
            )
        stored = result_store.load_stored(s, job_ids=[f.before_job_id])
        if not stored:
            raise UserError(field, f"the result before the step ({f.before_job_id}) is no longer stored.")
        job, metric = stored[0].job, f.metric
        through = measured_through(stored[0].result)
    if job.workload != "generate":
        raise UserError(field, f"the finding is on a {job.workload} series; a bisection measures generate.")
    return SweepSpec.model_validate(series_sweep(job, f"bisect-finding-{finding_id}")), good, bad, metric, through
