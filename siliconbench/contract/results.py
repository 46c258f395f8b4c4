"""The result record: what a job's child process sends back, stored whole and exported as JSON."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, Field

from .aggregate import Summary, summarize
from .engines import ENGINE_PACKAGE
from .jobs import JobSpec, digest
from .metrics import METRICS
from .workloads import COMMON_FACTS, FACTS


class JobStatus(StrEnum):
    queued = "queued"
    running = "running"
    ok = "ok"
    failed = "failed"
    cancelled = "cancelled"


class Environment(BaseModel):
    """The machine and software a result was measured with."""

    hostname: str
    os: str = Field(description="Darwin / Linux")
    os_version: str = Field(description="macOS product version or kernel release, plus build")
    chip: str = Field(description="Apple chip (machdep.cpu.brand_string) or CPU model name")
    cores: int
    memory_bytes: int
    machine: str = Field(description="arm64 / x86_64")
    python: str
    packages: dict[str, str] = Field(default_factory=dict, description="Versions of engine packages")
    engine_build: dict[str, str] = Field(default_factory=dict, description="llama.cpp commit/version, system info")
    backend: str = Field("", description="Metal / CPU / CUDA: the backend the engine actually used")
    blas: str = Field("", description="MLX on Linux: the BLAS preloaded into the child ('openblas' path) or 'bundled'")
    engine_options: dict = Field(default_factory=dict)
    host_details: dict = Field(
        default_factory=dict,
        description="The platform's own identity facts (siliconbench.worker.platform): on a Mac hw.model, "
        "chip, performance/efficiency cores, GPU cores, Metal family, unified memory, iogpu.wired_limit_mb, macOS "
        "version and build, Rosetta; on Linux physical cores, kernel, distribution. Part of the identity",
    )
    dtypes: dict[str, str] = Field(
        default_factory=dict,
        description="weights (the artifact's storage type: F16, Q4_K_M, f32, 4bit ...), "
        "activations (the compute dtype) and kv_cache, as the engine ran them; part of the identity",
    )

    def engine_version(self, engine: str) -> str | None:
        """The version of the engine's package (llama-cpp-python, mlx-lm) this result ran with."""
        return self.packages.get(ENGINE_PACKAGE.get(engine, ""))

    def identity(self) -> dict:
        """Fields that can move a number: results differing in any are never pooled."""
        return self.model_dump(exclude={"hostname"}) | {"hostname": self.hostname}


class Sample(BaseModel):
    """One repetition's raw values, metric name -> value (see siliconbench.contract.metrics).

    Workloads with several observations per repetition (concurrent: each request and each inter-token gap;
    multiprocess: each process; perplexity: each window) keep one Sample per observation, and job-scope
    values in one Sample of their own: ``repetition`` is then the observation's index in the job
    (0, 1, ... measured; -1, -2, ... warmup), unique per job, and a metric's scope says what one sample is.
    """

    repetition: int
    warmup: bool = False
    values: dict[str, float]


class JobResult(BaseModel):
    job_id: str
    status: JobStatus
    error: str | None = None
    stderr_tail: str | None = None
    started_at: datetime | None = None
    finished_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    wall_s: float | None = Field(None, description="Child process wall time, start to exit")
    load_s: float | None = None
    peak_memory_bytes: int | None = None
    baseline_memory_bytes: int | None = None
    peak_footprint_bytes: int | None = Field(None, description="Darwin: the child's lifetime phys_footprint peak")
    baseline_footprint_bytes: int | None = Field(None, description="Darwin: phys_footprint before the model loads")
    samples: list[Sample] = Field(default_factory=list, description="Warmup repetitions included, flagged")
    environment: Environment | None = None
    extra: dict = Field(default_factory=dict, description="Engine-specific facts (n_ctx used, vocab size ...)")

    @property
    def throttled(self) -> bool | None:
        """The thermal gate's verdict: the job began or ended with the host throttled (siliconbench/worker/measure/thermal.py);
        None if not recorded."""
        return (self.extra.get("thermal") or {}).get("throttled")

    @property
    def contended(self) -> bool | None:
        """The busy gate's verdict: other processes took real CPU while the job ran (siliconbench/worker/measure/busy.py); None if
        not recorded."""
        return (self.extra.get("busy") or {}).get("contended")

    @property
    def disturbed(self) -> bool | None:
        """Either gate's verdict (siliconbench/worker/measure/gate.py): throttled or contended. Disturbed results are kept, marked,
        and left out of Compare and regression verdicts unless asked; None if neither gate recorded one."""
        verdicts = (self.throttled, self.contended)
        if any(verdicts):
            return True
        return False if any(v is not None for v in verdicts) else None

    def measured(self, metric: str) -> list[float]:
        return [s.values[metric] for s in self.samples if not s.warmup and metric in s.values]

    def summary(self, metric: str) -> Summary | None:
        return summarize(self.measured(metric), metric)

    def identity_hash(self, job: JobSpec) -> str:
        env = self.environment.identity() if self.environment else {}
        # The processes of one configuration are one measurement repeated: the same identity, pooled.
        return digest({"job": {k: v for k, v in job.key().items() if k != "process"}, "env": env})


def contract_problems(result: JobResult, workload: str) -> list[str]:
    """What in ``result`` the contract does not define: a sample metric no registry entry covers
    (siliconbench.contract.metrics), or a top-level fact in ``extra`` its workload kind does not declare
    (its module's FACTS in siliconbench/contract/workloads/). Checked where a worker's result is made and where any result is stored, as
    pyperf checks its metadata: a new figure is defined before it is written."""
    problems = []
    unknown = sorted({m for s in result.samples for m in s.values} - set(METRICS))
    if unknown:
        problems.append(f"metric(s) {', '.join(unknown)} have no definition in siliconbench/contract/metrics.py")
    facts = FACTS.get(workload)
    if facts is not None and result.status == JobStatus.ok:
        undeclared = sorted(set(result.extra) - facts - COMMON_FACTS)
        if undeclared:
            problems.append(
                f"extra fact(s) {', '.join(undeclared)} are not declared for workload {workload!r} in "
                f"siliconbench/contract/workloads/{workload}.py FACTS"
            )
    return problems


def failed(job_id: str, error: str, stderr_tail: str | None = None, **kw) -> JobResult:
    return JobResult(job_id=job_id, status=JobStatus.failed, error=error, stderr_tail=stderr_tail, **kw)
