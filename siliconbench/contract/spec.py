"""The sweep spec: a YAML file validated by pydantic, then checked against the models folder.

Structural errors (unknown keys, non-positive lengths, unknown engines) come from pydantic; errors
that need the models folder (unknown model, a quantization no model has, a length beyond the model's
context, a matrix over the job limit) come from ``check_against``. Both become one ``UserError``
naming the field, so a malformed sweep exits non-zero before anything is run or written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError, field_validator

from .engines import ENGINE_NAMES, EngineName
from .errors import UserError
from .manifest import FullDtype, Level
from .workloads import KINDS, GenerateWorkload

DEFAULT_MAX_JOBS = 10_000
# Fresh processes per configuration when a sweep compares engine versions and sets no `processes`.
# Processes, not repetitions inside one, are the independent unit; 15 a side is the least with which
# benchmarks/regression_power.py caught a 5% slowdown >= 95% of the time and kept A/A false regressions under 1%
# (docs/evidence/house-fifth-floor-2026-12-06/figures-moved-from-code.md).
COMPARE_PROCESSES = 15


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# One member per registered kind (siliconbench/contract/workloads/), told apart by `kind`.
# A union of a runtime tuple of kinds: only typing.Union spells it.
Workload = Annotated[Union[tuple(KINDS.values())], Field(discriminator="kind")]  # noqa: UP007
WORKLOAD_KINDS: dict[str, type[BaseModel]] = KINDS


KvCacheType = Literal["f16", "f32", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]


class LlamaCppOptions(Strict):
    """llama-bench's defaults, so a row of ours lines up with a row of theirs (-ngl 99, -b 2048, -ub 512,
    -fa auto, -ctk f16, -ctv f16, -mmp 1); the effective values are recorded with every result."""

    n_gpu_layers: int = Field(-1, description="Layers offloaded to the GPU (-1 = all; ignored on a CPU build)")
    use_mmap: bool = True
    n_batch: PositiveInt = 2048
    n_ubatch: PositiveInt = 512
    flash_attn: Literal["auto", "on", "off"] = Field(
        "auto",
        description="llama.cpp's own default 'auto' enables flash attention where the backend supports it "
        "(the choice is recorded as flash_attn_effective); true/false are read as on/off",
    )
    type_k: KvCacheType = Field("f16", description="KV-cache type of K (llama-bench -ctk)")
    type_v: KvCacheType = Field("f16", description="KV-cache type of V (llama-bench -ctv)")
    sampling: Literal["auto", "backend", "host"] = Field(
        "auto",
        description="Where each decode step's greedy choice of the next token runs: 'backend' in the step's own "
        "graph (llama.cpp's greedy sampler attached with llama_set_sampler, as llama-server --backend-sampling: "
        "only the id comes back, as MLX's mx.argmax on the device); 'host' numpy's argmax over the logits copied "
        "back (llama-bench copies them and samples nothing); 'auto' backend where the build can and the layers run "
        "on a GPU, host on a CPU. Recorded as run.",
    )
    driver: Literal["auto", "binding", "llama-bench"] = Field(
        "auto",
        description="On a llama.cpp build (engine_versions naming one): 'auto' drives its library through "
        "llama-cpp-python's binding where the build's llama.h matches the binding's, else measures generate "
        "through the build's own llama-bench; 'binding' or 'llama-bench' insist on one path. The server workloads "
        "(serve, concurrent, restart) on llama-server run the build's own llama-server on any commit, the tokenizer "
        "from the wheel's library, recorded as 'llama-server'. Recorded as run.",
    )

    @field_validator("flash_attn", mode="before")
    @classmethod
    def _flash_attn_bool(cls, v):
        return {True: "on", False: "off"}.get(v, v) if isinstance(v, bool) else v


class MlxOptions(Strict):
    blas: Literal["auto", "bundled", "openblas"] = Field(
        "auto",
        description="Linux CPU build only: 'auto' preloads Debian's OpenBLAS when present (recorded with the "
        "result); the wheel's bundled reference BLAS is ~30x slower on matmuls.",
    )
    prefill_step_size: PositiveInt = 2048


class EngineOptions(Strict):
    threads: PositiveInt | None = Field(
        None,
        description="CPU threads for decode and batch alike (llama.cpp; MLX's OpenBLAS on Linux). Default: the "
        "physical performance cores, llama-bench's default -t (hw.perflevel0.physicalcpu on a Mac)",
    )
    llama_cpp: LlamaCppOptions = Field(default_factory=LlamaCppOptions, alias="llama.cpp")
    mlx: MlxOptions = Field(default_factory=MlxOptions)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class HostFilter(Strict):
    """Hosts chosen by what they are rather than by name; every given condition must hold."""

    chip: str | None = Field(None, description="Substring of the chip name, case-insensitive ('M4', 'M2 Ultra')")
    min_memory_gb: Annotated[float, Field(gt=0)] | None = None
    engine: EngineName | None = Field(None, description="Host must have this engine installed")
    model: str | None = Field(None, description="The Mac's hw.model, e.g. 'Mac16,11' (case-insensitive, exact)")
    gpu_cores: PositiveInt | None = Field(
        None, description="Exactly this many GPU cores: binned chips (an M4 Pro with 16 or 20) differ only here"
    )
    gpu: str | None = Field(
        None,
        description="Substring of a CUDA host's GPU name as NVML gives it, "
        "case-insensitive ('H200', 'RTX 4090'); Macs have none",
    )


HostSelector = Literal["all"] | Annotated[list[str], Field(min_length=1)] | HostFilter


class SweepSpec(Strict):
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.\-]+$")
    description: str = ""
    models: Annotated[list[str], Field(min_length=1)]
    engines: Annotated[list[EngineName], Field(min_length=1)] = list(ENGINE_NAMES)
    quantizations: Annotated[list[str], Field(min_length=1)] = Field(
        ["full"],
        description="Levels (full, q8, q6, q5, q4, q3, q2: one artifact per engine, paired), exact names "
        "(Q4_K_M, IQ4_XS, 4bit-g32), or [all]: every form each model has, the levels' pairs first",
    )
    pairing: dict[Level, dict[EngineName, str]] | None = Field(
        None,
        description="Which exact type an engine runs for a level, where the default pair is not wanted "
        "(defaults: Q8_0/8bit, Q6_K/6bit, Q5_K_M/5bit, Q4_K_M/4bit, Q3_K_M/3bit, Q2_K/2bit), e.g. "
        "{q4: {llama.cpp: IQ4_XS, mlx: 4bit-g32}}",
    )
    workloads: Annotated[list[Workload], Field(min_length=1)] = [GenerateWorkload()]
    repetitions: PositiveInt = Field(5, description="Measured repetitions inside each process (after warmup)")
    processes: PositiveInt | None = Field(
        None,
        description="Fresh processes per configuration (and version), interleaved round by round. Default: "
        f"1, or {COMPARE_PROCESSES} when engine_versions lists two or more versions of an engine, because "
        "`compare` counts processes, not repetitions, as its independent samples",
    )
    warmup: Annotated[int, Field(ge=0)] = 1
    delay_s: Annotated[float, Field(ge=0)] = 0.0
    thermal: Literal["wait", "record", "refuse"] = Field(
        "wait",
        description="Before each job: wait for the host's nominal thermal state (up to thermal_timeout_s, "
        "then run and mark the result), only record the state, or refuse the job while the host is throttled. "
        "Thermal state and power are recorded at job start and end in every mode; delay_s stays the cooldown",
    )
    thermal_timeout_s: Annotated[float, Field(ge=0)] = 600.0
    busy: Literal["wait", "record", "refuse"] = Field(
        "wait",
        description="Before each job: wait until other processes leave the machine quiet (their CPU, "
        "memory pressure, swap; up to busy_timeout_s, then run and mark), only record, or refuse the job while "
        "the host is busy. What others took while the job ran is recorded in every mode; a job beside real load "
        "is marked contended and treated as a throttled one (siliconbench/worker/measure/busy.py)",
    )
    busy_timeout_s: Annotated[float, Field(ge=0)] = 600.0
    on_interrupt: Literal["fail", "rerun"] = Field(
        "fail",
        description="Embedded runs (no broker): when the process running the sweep (the dashboard, "
        "`siliconbench run`) stopped before its end, the next one to start on this host fails the unfinished "
        "jobs with that reason, or runs them again",
    )
    seed: int = 0
    timeout_s: PositiveInt = Field(900, description="Hard limit for one job's child process")
    max_jobs: PositiveInt = DEFAULT_MAX_JOBS
    engine_options: EngineOptions = Field(default_factory=EngineOptions)
    full_dtype: FullDtype = Field(
        "auto",
        description="The weight dtype level `full` stands for, the same for both engines: auto = f16 (GGUF "
        "F16 with MLX f16) where the jobs run on a Mac, f32 (GGUF F32 with MLX f32) elsewhere, where MLX's CPU "
        "build computes float16 10-40x slower",
    )
    hosts: HostSelector = Field("all", description="Fleet only: 'all', a list of worker names, or a filter")
    placement: Literal["each", "any"] = Field(
        "any", description="Fleet only: run every job on every matching host ('each'), or once on any ('any')"
    )
    engine_versions: dict[EngineName, Annotated[list[str], Field(min_length=1)]] | None = Field(
        None,
        description="Engine package versions (or engine environment names) to run side by side, e.g. "
        "{mlx: [0.32.2, 0.31.3]}; each job runs once per version, versions adjacent. See `siliconbench env`.",
    )
    version_order: Literal["fixed", "rotate"] = Field(
        "fixed",
        description="With engine_versions: each round runs the versions in the listed order ('fixed': A B, A B), "
        "or starts each round with the next one ('rotate': A B C, B C A, C A B), so a position's effect (the "
        "first process of a round meeting a cold cache) falls on every version alike",
    )
    install_versions: bool = Field(
        False,
        description="Install an engine version that no engine environment of the host holds yet, "
        "instead of refusing the sweep",
    )

    @property
    def resolved_processes(self) -> int:
        """Processes per configuration: the spec's own, else the default for what the sweep is for."""
        if self.processes is not None:
            return self.processes
        comparing = any(len(v) > 1 for v in (self.engine_versions or {}).values())
        return COMPARE_PROCESSES if comparing else 1

    @field_validator("models", "quantizations")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("lists each entry more than once")
        return v

    @field_validator("quantizations")
    @classmethod
    def _all_alone(cls, v: list[str]) -> list[str]:
        if "all" in (q.lower() for q in v) and len(v) > 1:
            raise ValueError("[all] already names every form: list it alone")
        return v

    @field_validator("engine_versions")
    @classmethod
    def _versions(cls, v: dict | None, info) -> dict | None:
        for engine, versions in (v or {}).items():
            if engine not in info.data.get("engines", ENGINE_NAMES):
                raise ValueError(f"names engine {engine!r}, which the sweep's engines do not list")
            if len(set(versions)) != len(versions):
                raise ValueError(f"lists a version of {engine} more than once")
        return v


def _field_of(loc: tuple) -> str:
    parts = []
    for p in loc:
        if isinstance(p, int):
            parts[-1] = f"{parts[-1]}[{p}]" if parts else f"[{p}]"
        elif p not in WORKLOAD_KINDS:  # discriminator tags add noise to the path
            parts.append(str(p))
    return ".".join(parts) or "sweep"


def parse_sweep(data: object, source: str = "sweep") -> SweepSpec:
    """Validate already-parsed YAML/JSON data; every error names the field."""
    if not isinstance(data, dict):
        raise UserError(source, "a sweep must be a YAML mapping with at least `name` and `models`.")
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = _field_of(tuple(err["loc"]))
        choices = None
        if err["type"] in ("literal_error", "union_tag_invalid"):
            choices = [
                c.strip(" '")
                for c in str(err.get("ctx", {}).get("expected", "")).replace(" or ", ",").split(",")
                if c.strip()
            ]
        msg = err["msg"].rstrip(".") + "."
        if err["type"] == "extra_forbidden":
            msg = f"unknown setting. Known settings here: {', '.join(_known_keys(data, err['loc']))}."
        more = len(exc.errors()) - 1
        if more:
            msg += f" ({more} more problem{'s' if more > 1 else ''} after this one.)"
        raise UserError(f"{source}: {field}" if source != "sweep" else field, msg, choices) from None


def _known_keys(data: object, loc: tuple) -> list[str]:
    model: type[BaseModel] = SweepSpec
    for p in loc[:-1]:
        if isinstance(p, str) and p in model.model_fields:
            ann = model.model_fields[p].annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                model = ann
        elif p in WORKLOAD_KINDS:
            model = WORKLOAD_KINDS[p]
    return sorted(f.alias or n for n, f in model.model_fields.items())


def load_sweep(path: Path | str) -> SweepSpec:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError("SWEEP", f"cannot read {path}: {exc.strerror}.") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(str(path), f"is not valid YAML: {exc}") from None
    return parse_sweep(_beside(data, path.parent), source="sweep")


# A workload's settings that name a file of the user's ("corpus" being the shipped text instead).
FILE_SETTINGS = ("text", "prompts")


def _beside(data: object, folder: Path) -> object:
    """A sweep file's own files (a perplexity workload's ``text``, a serve workload's ``prompts``) are named relative
    to the file itself."""
    for w in (data.get("workloads") or []) if isinstance(data, dict) else []:
        for key in FILE_SETTINGS:
            value = w.get(key) if isinstance(w, dict) else None
            if isinstance(value, str) and value != "corpus" and not Path(value).expanduser().is_absolute():
                w[key] = str(folder / value)
    return data
