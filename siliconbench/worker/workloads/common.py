"""What the workloads share: the job context, the outcome, the sample log, the process's memory, prompts from the
corpus."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from siliconbench.contract.engines import describe
from siliconbench.contract.errors import WorkloadError
from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.results import Sample
from siliconbench.contract.settings import env_setting

from siliconbench.worker import platform
from siliconbench.worker.builds import driver
from siliconbench.worker.builds.tool import ToolEngine
from siliconbench.worker.engines import Engine, get_engine
from siliconbench.worker.models.make.tokenizer import CORPUS_PATH
from siliconbench.worker.serving.served_build import ServedBuild
from siliconbench.worker.serving.servers import server_of


@dataclass
class Context:
    job: JobSpec
    models_dir: Path
    emit: Callable[..., None]
    workdir: Path  # scratch folder of this job (server logs), removed after it
    meter: Any = None  # a CUDA host's siliconbench.worker.platform.nvidia.DeviceMeter, started before the workload runs

    def footprint_now(self) -> int | None:
        """This process's phys_footprint now (Darwin; None elsewhere)."""
        return platform.current().phys_footprint(os.getpid())

    @property
    def artifact(self) -> Path:
        return self.models_dir / self.job.artifact

    def spawned(self, pid: int, create_time: float) -> None:
        """Announce a process group the runner must kill if this job's process dies first."""
        self.emit("spawned", pgid=pid, create_time=create_time)


@dataclass
class Outcome:
    samples: list[Sample]
    engine: Engine  # for the Environment: describe() works with or without a model loaded
    extra: dict = field(default_factory=dict)
    load_s: float | None = None
    baseline_memory_bytes: int | None = None
    baseline_footprint_bytes: int | None = None
    device_memory: dict = field(default_factory=dict)  # what the engine says it allocated (Engine.memory_facts)
    # False where this process only drove other processes (servers, engine processes): its peak means nothing.
    own_peak: bool = True


class SampleLog:
    """Samples with unique indices: measured 0, 1, 2 ...; warmup -1, -2 ... (see siliconbench.contract.results.Sample)."""

    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self._measured = self._warm = 0

    def add(self, values: dict[str, float], warmup: bool = False) -> None:
        values = {k: float(v) for k, v in values.items() if v is not None}
        if not values:
            return
        if warmup:
            self._warm += 1
            index = -self._warm
        else:
            index = self._measured
            self._measured += 1
        self.samples.append(Sample(repetition=index, warmup=warmup, values=values))


def repetitions(ctx: Context):
    """(r, warmup) for the job's warmup then measured repetitions, with the sweep's delay between them."""
    job = ctx.job
    for r in range(job.warmup + job.repetitions):
        if r and job.delay_s:
            time.sleep(job.delay_s)
        yield r, r < job.warmup


def done(ctx: Context, r: int, warm: bool) -> None:
    ctx.emit("repetition", index=r, warmup=warm)


def rss_peak_bytes() -> int:
    return platform.current().own_peak_rss_bytes()


def footprint_peak_bytes() -> int | None:
    return platform.current().lifetime_max_phys_footprint(os.getpid())


def fault_point(point: str) -> None:
    """Fault injection for the runner's own tests: SILICONBENCH_FAULT=crash|hang|error at ``load``."""
    fault = env_setting("fault")
    if point != "load" or not fault:
        return
    if fault == "crash":
        os.abort()
    if fault == "hang":
        time.sleep(10_000)
    if fault == "error":
        raise RuntimeError("injected error (SILICONBENCH_FAULT=error)")


def rss_now_bytes() -> int:
    return int(psutil.Process().memory_info().rss)


# Workloads that need of the engine only a tokenizer and its server: on a build, served by the build's llama-server
SERVER_WORKLOADS = frozenset({"serve", "concurrent", "restart"})


def engine_for(job: JobSpec, options: dict | None = None) -> Engine | ToolEngine | ServedBuild:
    """The job's engine with its options; for a job on a llama.cpp build, the path the build is measured through
    (siliconbench.worker.builds.driver): the binding on the build's library, the build's own llama-bench (generate
    only), or for a server workload on llama-server the build's own server with the wheel's tokenizer (any commit)."""
    opts = dict(options if options is not None else job.engine_options)
    if describe(job.engine).built_from_source:
        build = driver.current()
        if build is not None and job.workload in SERVER_WORKLOADS and server_of(job) == "llama-server":
            return ServedBuild(build, opts)
        build, path = driver.prepare(opts)
        if path == "llama-bench":
            if job.workload != "generate":
                raise WorkloadError(
                    f"the build {build.rev.label} is measured through its own llama-bench here (driver "
                    f"{opts.get('driver', 'auto')!r}), which runs the generate workload only, not {job.workload}"
                )
            return ToolEngine(build, opts)
    engine = get_engine(job.engine)
    engine.options = opts
    return engine


def vocab_engine(ctx: Context) -> Engine | ServedBuild:
    """The job's engine with only the tokenizer of its model loaded (for prompts sent to a server)."""
    engine = engine_for(ctx.job)
    engine.load_vocab(ctx.artifact)
    return engine


def corpus_text() -> str:
    return CORPUS_PATH.read_text()


class Prompts:
    """Text prompts of about n tokens cut from the shipped corpus, a different slice for every index.

    Different beginnings matter: both servers reuse a cached prompt prefix, which would hide prefill.
    """

    def __init__(self, engine: Engine, n_tokens: int, seed: int):
        self.ids = engine.tokenize(corpus_text())
        self.engine, self.n, self.seed = engine, n_tokens, seed
        if len(self.ids) <= n_tokens:
            raise WorkloadError(f"prompt_tokens={n_tokens} is longer than the corpus ({len(self.ids)} tokens)")

    def text(self, index: int) -> str:
        span = len(self.ids) - self.n
        start = (index * 7919 + self.seed * 104_729) % span  # primes: slices spread over the whole text
        return self.engine.detokenize(self.ids[start : start + self.n])
