"""The sweeps a bisection measures with, for both ways of running one (``embedded.bisect`` on this machine,
``coordinator.watch.bisections`` on the fleet): a finding's series as a sweep, and one step of it.

Every commit of a step is measured through its own llama-bench (``llama.cpp.driver: llama-bench``): most commits
of a real range match no llama-cpp-python binding, and one path for all keeps the steps comparable.
"""

from __future__ import annotations

from siliconbench.jobs import JobSpec
from siliconbench.spec import SweepSpec

ENGINE = "llama.cpp"
MEASURED = ("decode_tps", "prefill_tps")  # what a build's llama-bench measures (worker/builds/tool.py)


def series_sweep(job: JobSpec, name: str) -> dict:
    """The sweep (a document) that measures ``job``'s series again: its model, level, lengths, repetitions,
    warm-up, seed and threads, on llama.cpp."""
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
        "engine_options": {"threads": job.engine_options.get("threads")},
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
