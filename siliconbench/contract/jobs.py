"""Job spec and sweep expansion: pure and deterministic, so the same sweep gives the same job ids."""

from __future__ import annotations

import hashlib
import itertools
import json
from typing import Literal

from pydantic import BaseModel, Field

from .engines import describe
from .errors import UserError
from .manifest import ENGINE_FORMAT, FULL_DTYPES, QUANT_LEVELS, ModelCatalog, auto_full_dtype
from .spec import SweepSpec
from .workloads import KINDS, LABELS, check_job, configs, engine_params, least_duration_s, n_configs
from .workloads.base import FILE_SUFFIX

# "noop" runs every step of a job except the engine (benchmarks/plumbing.py); no sweep can ask for it.
WorkloadKind = Literal[
    (*KINDS, "noop")
]  # the registered kinds (siliconbench/contract/workloads/): one entry adds a kind


class JobSpec(BaseModel):
    """Everything a worker needs to run one job; travels as JSON."""

    job_id: str
    sweep_id: str
    sweep_name: str
    index: int = Field(description="Position in the sweep's run order")
    model: str
    engine: Literal["llama.cpp", "mlx"]
    quant: str = Field(description="Exact quantization of the artifact (F16, Q4_K_M, 4bit ...)")
    quant_level: str
    artifact: str = Field(description="Artifact path relative to the models folder")
    model_sha256: str
    workload: WorkloadKind = "generate"
    n_prompt: int
    n_gen: int
    n_depth: int
    repetitions: int
    warmup: int
    delay_s: float
    seed: int
    timeout_s: int
    engine_options: dict = Field(description="The options of this job's engine, plus threads")
    host: str | None = Field(None, description="Worker name the job must run on (placement: each), else any")
    params: dict = Field(
        default_factory=dict, description="Workload-specific settings (siliconbench.contract.workloads)"
    )
    engine_version: str | None = Field(
        None, description="Engine package version or engine environment name to run under (None: the worker's own)"
    )
    process: int = Field(0, ge=0, description="Which of the configuration's fresh processes (round) this job is")
    thermal: Literal["wait", "record", "refuse"] = Field("wait", description="The sweep's thermal gate (spec.py)")
    thermal_timeout_s: float = 600.0
    busy: Literal["wait", "record", "refuse"] = Field("wait", description="The sweep's busy gate (spec.py)")
    busy_timeout_s: float = 600.0
    fetch: dict | None = Field(
        None,
        description="Set by placement where the artifact has an origin a worker can "
        "fetch from: {manifest: the model's facts, artifact: the artifact with files and "
        "origin}; a worker that lacks the artifact fetches it before the job",
    )
    files: dict[str, str] = Field(
        default_factory=dict,
        description="A user's file too large to travel with the job (over MAX_USER_FILE_BYTES): its setting's "
        "digest param names it, this the path it was read at on the machine that expanded the sweep. The one who "
        "stores the sweep keeps its bytes once by digest (siliconbench.storage.user_files); a worker reads it there "
        "when the path does not hold those bytes here",
    )
    model_notes: dict = Field(
        default_factory=dict, description="What the model's manifest says every result must carry (tokenizer_mismatch)"
    )

    def key(self) -> dict:
        """The fields that make two jobs the same measurement (what a job id is a digest of)."""
        # params, engine_version and process only when set, so jobs keep the ids they had before these existed
        unset = (
            ({"params"} if not self.params else set())
            | ({"engine_version"} if self.engine_version is None else set())
            | ({"process"} if not self.process else set())
        )
        # the thermal gate decides when a job runs, and a fetch where its files come from, not what it measures
        return self.model_dump(
            exclude={
                "job_id",
                "sweep_id",
                "sweep_name",
                "index",
                "thermal",
                "thermal_timeout_s",
                "busy",
                "busy_timeout_s",
                "fetch",
                "files",
                "model_notes",
            }
            | unset
        )

    def label(self) -> str:
        if self.workload == "generate":
            return f"{self.engine} {self.model} {self.quant} p{self.n_prompt} g{self.n_gen} d{self.n_depth}"
        shown = {k: self.params[k] for k in LABELS.get(self.workload, ()) if self.params.get(k) is not None}
        return f"{self.engine} {self.model} {self.quant} {self.workload} " + " ".join(
            f"{k}={v}" for k, v in shown.items()
        )


def fits_in_time(job: JobSpec, at: str) -> None:
    """Refuse a job its kind knows cannot end within the sweep's timeout_s (a serve job's arrivals alone take
    num_requests / request_rate seconds a run), instead of a failed job after timeout_s."""
    least, field = least_duration_s(job)
    if least is not None and least > job.timeout_s:
        raise UserError(
            f"{at}.{field}",
            f"a {job.workload} job here takes at least {least:,.0f} s ({job.label()}, {job.repetitions} "
            f"repetition(s)), over timeout_s = {job.timeout_s:,} s: raise timeout_s or ask for less.",
        )


def digest(obj: object, n: int = 16) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:n]


def spec_digest(spec: SweepSpec) -> str:
    data = spec.model_dump(mode="json", by_alias=True)
    for unset in [k for k in ("engine_versions", "install_versions", "processes") if not data.get(k)]:
        del data[unset]  # sweeps that name no versions keep the digests (and job ids) they had before
    if data.get("version_order") == "fixed":
        data.pop("version_order")  # sweeps in the fixed order keep their digests (and job ids)
    if data.get("full_dtype", "auto") in (None, "auto"):
        data.pop("full_dtype", None)  # likewise sweeps that leave level full to the platform
    if (data.get("thermal"), data.get("thermal_timeout_s")) == ("wait", 600.0):
        data.pop("thermal", None), data.pop("thermal_timeout_s", None)  # and the default thermal gate
    if (data.get("busy"), data.get("busy_timeout_s")) == ("wait", 600.0):
        data.pop("busy", None), data.pop("busy_timeout_s", None)  # and the default busy gate
    if data.get("on_interrupt") == "fail":
        data.pop("on_interrupt")
    return digest(data, 12)


# Engine options added after jobs were first stored: in a job only when set, so jobs keep the ids they had.
LATER_OPTIONS = {"driver": "auto", "sampling": "auto"}


def recorded_options(options: BaseModel) -> dict:
    """An engine's options as a job records them: every field, less those of LATER_OPTIONS at their default."""
    out = options.model_dump()
    for key, default in LATER_OPTIONS.items():
        if out.get(key) == default:
            out.pop(key)
    return out


MAX_FORMATS = 24  # what [all] counts as in the bound before expansion: the forms per engine of a model


def count_jobs(spec: SweepSpec) -> int:
    """Upper bound of the matrix size, computed before expanding anything."""
    per_workload = sum(n_configs(w) for w in spec.workloads)
    versions = max((len(v) for v in (spec.engine_versions or {}).values()), default=1)
    forms = sum(MAX_FORMATS if q.lower() == "all" else 1 for q in spec.quantizations)
    return len(spec.models) * len(spec.engines) * forms * per_workload * versions * spec.resolved_processes


def full_dtype_of(spec: SweepSpec, catalog: ModelCatalog, setting: str | None = None) -> tuple[str, bool]:
    """The weight dtype level ``full`` stands for in this expansion, and whether the sweep asked for it.

    The setting is ``setting`` (expand's argument), else the sweep's ``full_dtype`` (auto | f16 | bf16 | f32),
    else ``auto``. ``auto`` decides by the OS of the machines that will run the jobs, which the catalog
    carries (`ModelCatalog.platforms`): the embedded runner's catalog is this machine's folder, so this
    machine's OS; the fleet's catalog is given the OS its live workers registered. Darwin (MLX on Metal):
    f16, GGUF F16 with MLX f16. Anything else (the MLX CPU build, where float16/bfloat16 compute is
    10-40x slower than float32): f32, GGUF F32 with MLX f32. Workers of both kinds: a UserError asking
    for ``full_dtype``. An explicit f16 / bf16 / f32 is the same on every host.
    """
    value = setting or getattr(spec, "full_dtype", None) or "auto"
    if value == "auto":
        return auto_full_dtype(catalog.platforms), False
    if value not in FULL_DTYPES:
        raise UserError(
            "full_dtype", f"full_dtype {value!r} is not one of auto, {', '.join(FULL_DTYPES)}.", ["auto", *FULL_DTYPES]
        )
    return value, True


def expand(
    spec: SweepSpec, catalog: ModelCatalog, sweep_id: str | None = None, full_dtype: str | None = None
) -> list[JobSpec]:
    """The sweep's jobs in run order; raises UserError naming the field for anything impossible.

    Run order: all work on model A, then B (page cache stays warm for one model at a time), and the
    engines alternate inside each configuration, so slow drift such as thermal throttling does not
    line up with one engine.

    Artifacts: an exact quant name (F16, Q4_K_M, f32 ...) is that artifact, for the engines whose format has
    it; q8 / q4 are the level's artifacts; ``full`` is a pair of one weight dtype chosen per platform (see
    `full_dtype_of` and `ModelManifest.full_pair`): F16 with f16 on a Mac, F32 with f32 elsewhere. A model
    whose manifest predates those artifacts still expands, to the pair it has (F16 with f32).
    """
    total = count_jobs(spec)
    if total > spec.max_jobs:
        raise UserError(
            "max_jobs",
            f"the sweep expands to {total:,} jobs, over the limit of {spec.max_jobs:,}; "
            "narrow the matrix or raise max_jobs.",
        )
    sweep_id = sweep_id or f"{spec.name}-{spec_digest(spec)}"
    manifests = {}
    for i, name in enumerate(spec.models):
        if "/" in name or name.startswith("."):
            raise UserError(
                f"models[{i}]",
                f"{name!r} is a path; name a model from the models folder {catalog.models_dir} by its logical name.",
                catalog.names(),
            )
        manifests[name] = catalog.get(name, field=f"models[{i}]")

    full = (
        full_dtype_of(spec, catalog, full_dtype)
        if any(q.lower() in ("full", "all") for q in spec.quantizations)
        else None
    )
    jobs: list[JobSpec] = []
    pairs = [
        (mi, name, qi, resolved)
        for (mi, name), (qi, quant) in itertools.product(enumerate(spec.models), enumerate(spec.quantizations))
        for resolved in resolutions(spec, manifests[name], qi, quant, full)
    ]
    for mi, name, _qi, resolved in pairs:
        for wi, w in enumerate(spec.workloads):
            jobs += _workload_jobs(
                spec, catalog, sweep_id, mi, manifests[name], resolved, wi, w, start=len(jobs), full_dtype=full_dtype
            )
    return _rounds(spec, jobs)


def resolutions(spec: SweepSpec, m, qi: int, quant: str, full: tuple[str, bool] | None) -> list[dict]:
    """The artifact each engine runs for ``quantizations[qi]``, as one {engine: artifact | None} per pair.

    A level is one pair (the sweep's ``pairing``, else DEFAULT_PAIRING, else the level's first artifact);
    ``full`` the pair of one weight dtype; ``all`` every level's pair, then each remaining form on its own."""
    engines = spec.engines
    q = quant.lower()
    if q == "all":
        out = [r for level in QUANT_LEVELS for r in _level_pair(spec, m, level, full)]
        taken = {(a.format, a.quant) for r in out for a in r.values() if a}
        for a in m.artifacts:
            if (a.format, a.quant) not in taken and any(ENGINE_FORMAT[e] == a.format for e in engines):
                out.append({e: a if ENGINE_FORMAT[e] == a.format else None for e in engines})
        if not out:
            raise UserError(f"quantizations[{qi}]", f"model {m.name!r} has no form for engines {', '.join(engines)}.")
        return out
    if q in QUANT_LEVELS:
        out = _level_pair(spec, m, q, full)
    else:
        pair = {e: m.artifact_for(e, quant) for e in engines}
        out = [pair] if any(pair.values()) else []
    if not out:
        what = f"{quant!r} ({full[0]} weights, full_dtype)" if q == "full" and full else repr(quant)
        raise UserError(
            f"quantizations[{qi}]",
            f"model {m.name!r} has no artifact for {what} for engines {', '.join(engines)}.",
            m.quant_names(),
        )
    return out


def _level_pair(spec: SweepSpec, m, level: str, full: tuple[str, bool] | None) -> list[dict]:
    """[the level's pair] or [] where no engine has it."""
    engines = spec.engines
    if level == "full" and full is not None:
        pair = m.full_pair(engines, full[0], exact=full[1])
    else:
        chosen = (spec.pairing or {}).get(level) or {}
        pair = {e: m.artifact_for(e, chosen.get(e, level)) for e in engines}
        for e, name in chosen.items():
            if e in engines and pair[e] is None:
                raise UserError(f"pairing.{level}.{e}", f"model {m.name!r} has no {e} form {name!r}.", m.quant_names())
    return [pair] if any(pair.values()) else []


def model_notes(m) -> dict:
    """What a result of this model must carry from its manifest (a tokenizer mismatch `models add` allowed)."""
    return {"tokenizer_mismatch": m.tokenizer_mismatch} if getattr(m, "tokenizer_mismatch", None) else {}


def _rounds(spec: SweepSpec, jobs: list[JobSpec]) -> list[JobSpec]:
    """Each configuration as ``processes`` rounds, and each round runs every engine and every version the sweep
    names for it, adjacent: A/B, A/B, ... so drift over the rounds hits every side alike."""
    processes = spec.resolved_processes
    if not spec.engine_versions and processes == 1:
        return jobs
    groups: list[list[JobSpec]] = []
    for job in jobs:
        # expand() puts each configuration's engines adjacent, each once: a repeated engine starts the next
        if groups and job.engine not in {j.engine for j in groups[-1]}:
            groups[-1].append(job)
        else:
            groups.append([job])
    out: list[JobSpec] = []
    for group in groups:
        out += interleave(
            group, processes, spec.engine_versions or {}, start=len(out), rotate=spec.version_order == "rotate"
        )
    return out


def interleave(
    group: list[JobSpec], processes: int, versions: dict[str, list[str]], start: int = 0, *, rotate: bool = False
) -> list[JobSpec]:
    """``processes`` rounds of the template jobs ``group``; each round runs every job once per engine version
    ``versions`` names for its engine (none named: the interpreter's own), adjacent, A/B, A/B, ... (``rotate``:
    round r starts with version r mod n, A B C, B C A, C A B). Each copy gets its round as ``process``, its
    position from ``start`` as ``index``, and its id from its sweep and key (the order does not change an id)."""
    out: list[JobSpec] = []
    for r in range(processes):
        for job in group:
            named = versions.get(job.engine) or [None]
            k = r % len(named) if rotate else 0
            for version in named[k:] + named[:k]:
                j = job.model_copy(update={"engine_version": version, "process": r, "index": start + len(out)})
                j.job_id = digest({"sweep": j.sweep_id, **j.key()})
                out.append(j)
    return out


def _workload_jobs(
    spec: SweepSpec,
    catalog: ModelCatalog,
    sweep_id: str,
    mi: int,
    m,
    resolved: dict,
    wi: int,
    w,
    start: int,
    full_dtype: str | None = None,
) -> list[JobSpec]:
    """Jobs of one workload on one model and quantization, engines alternating inside each configuration (an engine
    without the artifact, or to which the configuration does not apply, is left out: not an error)."""
    jobs: list[JobSpec] = []
    opts = spec.engine_options
    to_full = w.kind == "swap" and w.to_quant.lower() == "full"
    full = full_dtype_of(spec, catalog, full_dtype) if to_full else None
    for cfg in configs(w, wi, m, catalog, list(spec.engines)):
        for engine in spec.engines:
            art = resolved[engine]
            params = (
                engine_params(w, wi, cfg, engine, m.name, art, catalog, full=full, engines=tuple(spec.engines))
                if art
                else None
            )
            if params is None:  # no artifact for this engine, or the configuration does not apply to it
                continue
            params = dict(params)  # one configuration's params serve every engine: taken apart per job
            files = {k: params.pop(k) for k in list(params) if k.endswith(FILE_SUFFIX)}
            rel = catalog.artifact_path(m.name, art, field=f"models[{mi}]").relative_to(catalog.models_dir)
            eng_opts = recorded_options(getattr(opts, describe(engine).options))
            job = JobSpec(
                job_id="",
                sweep_id=sweep_id,
                sweep_name=spec.name,
                index=start + len(jobs),
                model=m.name,
                engine=engine,
                quant=art.quant,
                quant_level=art.level,
                artifact=str(rel),
                model_sha256=art.sha256,
                workload=w.kind,
                n_prompt=cfg.n_prompt,
                n_gen=cfg.n_gen,
                n_depth=cfg.n_depth,
                repetitions=spec.repetitions if cfg.repetitions is None else cfg.repetitions,
                warmup=spec.warmup if cfg.warmup is None else cfg.warmup,
                delay_s=spec.delay_s,
                seed=spec.seed,
                timeout_s=spec.timeout_s,
                engine_options={"threads": opts.threads, **eng_opts},
                params=params,
                files=files,
                thermal=spec.thermal,
                thermal_timeout_s=spec.thermal_timeout_s,
                busy=spec.busy,
                busy_timeout_s=spec.busy_timeout_s,
                model_notes=model_notes(m),
            )
            job.job_id = digest({"sweep": sweep_id, **job.key()})
            fits_in_time(job, f"workloads[{wi}]")
            check_job(job, f"workloads[{wi}]")
            jobs.append(job)
    return jobs
