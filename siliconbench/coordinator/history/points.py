"""Series and their history: stored results as points, grouped by what makes two numbers comparable.

A *series* is one (host, model digest, quantization, workload, lengths, engine options) measured over
engine versions and time. The lengths that define it depend on the metric: prefill and TTFT depend on
the prompt and the depth before it, decode on the tokens generated and the context they start from
(depth + prompt). So llama-bench's ``tg128 @ d512`` joins the decode series of a siliconbench job with
a 512-token prompt and 128 generated tokens, and its ``pp512`` the prefill series.

A point's *components* are the versions that can move a number (engine packages, the llama.cpp commit
and build, OS build, Python, BLAS, backend); they are what compare lists per side and what
``regressions`` names at each change point. The selectors that pick points are ``selectors.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from packaging.version import InvalidVersion, Version

from siliconbench.contract.aggregate import summarize
from siliconbench.contract.engines import ENGINE_PACKAGE, ENGINES
from siliconbench.contract.jobs import JobSpec, digest
from siliconbench.contract.metrics import METRICS
from siliconbench.contract.results import JobResult

PREFILL_LIKE = ("prefill_tps", "engine_prefill_tps", "ttft_ms")
DECODE_LIKE = ("decode_tps", "engine_decode_tps")
JOB_VALUE_FIELDS = (
    "load_s",
    "peak_memory_bytes",
    "baseline_memory_bytes",
    "peak_footprint_bytes",
    "baseline_footprint_bytes",
)
# Dimensions a selector can vary on purpose: compare pairs series across them instead of within them.
ACROSS = {"host": ("host",), "engine": ("engine", "quant", "options"), "model": ("model_sha256",), "quant": ("quant",)}


@dataclass
class Point:
    """One stored result, flattened for comparisons and history."""

    job_id: str
    sweep_id: str
    sweep_name: str
    host: str
    engine: str
    model: str
    quant: str
    quant_level: str
    workload: str
    n_prompt: int
    n_gen: int
    n_depth: int
    model_sha256: str
    options: dict
    params: dict
    components: dict[str, str]
    when: datetime
    samples: dict[str, list[float]]
    source: str = "siliconbench"
    engine_version: str | None = None
    reported: dict[str, float] = field(default_factory=dict)  # aggregates of imports without raw samples
    disturbed: bool = False  # throttled or contended while it ran (JobResult.disturbed): no verdict pools it

    def center(self, metric: str) -> float | None:
        """The point's value in a history: the median of its raw samples, else a reported aggregate."""
        s = summarize(self.samples.get(metric, []))
        return s.median if s else self.reported.get(metric)

    @property
    def engine_package_version(self) -> str | None:
        return self.components.get(ENGINE_PACKAGE.get(self.engine, ""))


def components(result: JobResult) -> dict[str, str]:
    env = result.environment
    if env is None:
        return {}
    out = {k.lower(): str(v) for k, v in env.packages.items()}
    build = env.engine_build or {}
    if build.get("commit"):
        out["llama.cpp"] = str(build["commit"])
    if build.get("build_number"):
        out["build"] = str(build["build_number"])
    for key, value in (("os", env.os_version), ("python", env.python), ("blas", env.blas), ("backend", env.backend)):
        if value:
            out[key] = str(value)
    return out


def _options(job: JobSpec, result: JobResult) -> dict:
    """The engine options that define a series: the effective ones, without what the lengths decide."""
    opts = dict(job.engine_options)
    eff = result.environment.engine_options if result.environment else {}
    if eff.get("threads"):
        opts["threads"] = eff["threads"]
    if eff.get("driver"):  # a llama.cpp build measured through the binding or through its own llama-bench
        opts["driver"] = eff["driver"]
    opts.pop("n_ctx", None)
    ngl = opts.get("n_gpu_layers")
    if isinstance(ngl, int) and (ngl < 0 or ngl >= 99):  # "all layers", as llama-bench's default 99 means too
        opts["n_gpu_layers"] = "all"
    return opts


def to_point(job: JobSpec, result: JobResult, host: str | None = None, created_at: datetime | None = None) -> Point:
    samples = {m: result.measured(m) for m in METRICS if METRICS[m].scope == "repetition"}
    for f in JOB_VALUE_FIELDS:  # a job-scope metric contributes one value per job
        v = getattr(result, f, None)
        if v is not None:
            samples[f] = [float(v)]
    lb = result.extra.get("llama_bench") or {}
    env = result.environment
    return Point(
        job_id=job.job_id,
        sweep_id=job.sweep_id,
        sweep_name=job.sweep_name,
        host=(env.hostname if env else None) or host or "",
        engine=job.engine,
        model=job.model,
        quant=job.quant,
        quant_level=job.quant_level,
        workload=job.workload,
        n_prompt=job.n_prompt,
        n_gen=job.n_gen,
        n_depth=job.n_depth,
        model_sha256=job.model_sha256,
        options=_options(job, result),
        params=dict(getattr(job, "params", {}) or {}),
        components=components(result),
        when=result.started_at or result.finished_at or created_at,
        samples={k: v for k, v in samples.items() if v},
        source=result.extra.get("source", "siliconbench"),
        engine_version=job.engine_version,
        reported={k: float(v) for k, v in (lb.get("reported") or {}).items()},
        disturbed=bool(result.disturbed),
    )


# -------------------------------------------------------------------------------------------- series


def lengths(p: Point, metric: str) -> dict:
    if p.workload == "generate" and metric in PREFILL_LIKE:
        return {"n_prompt": p.n_prompt, "n_depth": p.n_depth}
    if p.workload == "generate" and metric in DECODE_LIKE:
        return {"n_gen": p.n_gen, "context": p.n_depth + p.n_prompt}
    return {"n_prompt": p.n_prompt, "n_gen": p.n_gen, "n_depth": p.n_depth}


def lengths_label(p: Point, metric: str) -> str:
    ln = lengths(p, metric)
    if "context" in ln:
        return f"tg{ln['n_gen']}" + (f" @ d{ln['context']}" if ln["context"] else "")
    if "n_gen" not in ln:
        return f"pp{ln['n_prompt']}" + (f" @ d{ln['n_depth']}" if ln["n_depth"] else "")
    return f"p{p.n_prompt} g{p.n_gen} d{p.n_depth}"


def series_key(p: Point, metric: str, across: tuple[str, ...] = ()) -> dict:
    """What a series is; ``across`` drops dimensions a comparison varies on purpose (host, engine ...)."""
    key = {
        "host": p.host,
        "engine": p.engine,
        "model_sha256": p.model_sha256,
        "quant": p.quant,
        "quant_level": p.quant_level,
        "workload": p.workload,
        "lengths": lengths(p, metric),
        "options": p.options,
        "params": p.params,
    }
    for dim in across:
        for f in ACROSS.get(dim, ()):
            key.pop(f, None)
    return key


def series_id(p: Point, metric: str, across: tuple[str, ...] = ()) -> str:
    return digest(series_key(p, metric, across))


def series_label(p: Point, metric: str, across: tuple[str, ...] = ()) -> str:
    engine = "*" if "engine" in across else p.engine
    quant = p.quant_level if "engine" in across else p.quant
    host = "" if "host" in across else f" on {p.host}"
    params = "".join(f" {k}={v}" for k, v in sorted(p.params.items()) if not isinstance(v, (dict, list)))
    return (
        f"{engine} {p.model} {quant} {p.workload if p.workload != 'generate' else ''}{lengths_label(p, metric)}"
        f"{params}{host}".replace("  ", " ")
    )


# ------------------------------------------------------------------------------------------ ordering


def _version_tuple(v: str | None) -> tuple | None:
    if not v:
        return None

    try:
        return (Version(v.lstrip("bv")),)
    except InvalidVersion:
        return None


def order_key(p: Point):
    """Versions first, then time: llama.cpp by build number where known, else llama-cpp-python's version;
    MLX by (mlx-lm, mlx)."""
    order_by = ENGINES[p.engine].order_by if p.engine in ENGINES else ()
    return tuple(_version_tuple(p.components.get(x)) for x in order_by)


def ordered(points: list[Point]) -> tuple[list[Point], str]:
    """A series' points in history order and how it was ordered ('version' or 'time').

    Ordered by version where every point has the same version fields (a backfilled old version then sits
    where it belongs), else by time alone."""
    keys = [order_key(p) for p in points]
    usable = [i for i in range(2) if all(k[i] is not None for k in keys)]
    if usable:
        return sorted(points, key=lambda p: (tuple(order_key(p)[i] for i in usable), p.when)), "version"
    return sorted(points, key=lambda p: p.when), "time"


def changed_components(before: Point, after: Point) -> dict[str, list[str | None]]:
    keys = sorted(set(before.components) | set(after.components))
    return {
        k: [before.components.get(k), after.components.get(k)]
        for k in keys
        if before.components.get(k) != after.components.get(k)
    }


def describe_changes(changes: dict[str, list]) -> str:
    return ", ".join(f"{k} {a or '—'} → {b or '—'}" for k, (a, b) in changes.items()) or "no component changed"
