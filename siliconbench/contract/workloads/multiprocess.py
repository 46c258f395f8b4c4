"""multiprocess: K engine processes on one host decoding at once, one job per K. Run by
siliconbench/worker/workloads/multiprocess.py."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveInt

from .base import Config, Strict, fits

LABEL = ("processes",)  # the params a job's one-line label shows (JobSpec.label)
FACTS = frozenset({"processes", "load_s_per_process", "n_ctx", "effective_options"})


class MultiprocessWorkload(Strict):
    """K engine processes on one host decoding at once, one job per K."""

    kind: Literal["multiprocess"] = "multiprocess"
    processes: Annotated[list[Annotated[int, Field(ge=1, le=64)]], Field(min_length=1)] = [1, 2, 4]
    prompt_tokens: PositiveInt = 64
    gen_tokens: PositiveInt = 64


def n_configs(w: MultiprocessWorkload) -> int:
    return len(w.processes)


def configs(w: MultiprocessWorkload, at: str, m, catalog, engines: list[str]) -> list[Config]:
    fits(w.prompt_tokens + w.gen_tokens, m, f"{at}.prompt_tokens", "prompt_tokens + gen_tokens")
    return [Config(w.prompt_tokens, w.gen_tokens, {"processes": k}) for k in w.processes]
