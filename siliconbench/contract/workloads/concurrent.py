"""concurrent: N streaming clients at once against one server, one job per N. Run by siliconbench/worker/workloads/concurrent.py."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt

from .base import SERVER_FACTS, Config, Counts, ServerSettings, fits, server_engine_params, server_params

LABEL = ("clients", "server")  # the params a job's one-line label shows (JobSpec.label)
FACTS = SERVER_FACTS | {
    "clients",
    "ready_s",
    "stop_s",
    "clean_stop",
    "memory_interval_ms",
    "hwm_supported",
    "token_count_source",
    "batching",
    "observed",
}


class ConcurrentWorkload(ServerSettings):
    """N streaming clients at once against one server, one job per N."""

    kind: Literal["concurrent"] = "concurrent"
    clients: Counts = [1, 2, 4, 8]
    prompt_tokens: PositiveInt = 128
    gen_tokens: PositiveInt = 64
    memory_interval_ms: PositiveInt = Field(10, description="How often the server tree's RSS is sampled")
    request_timeout_s: PositiveFloat = Field(
        300.0, description="A request's total time, from send to [DONE], after which it counts as failed"
    )


def n_configs(w: ConcurrentWorkload) -> int:
    return len(w.clients)


def configs(w: ConcurrentWorkload, at: str, m, catalog, engines: list[str]) -> list[Config]:
    fits(w.prompt_tokens + w.gen_tokens, m, f"{at}.prompt_tokens", "prompt_tokens + gen_tokens")
    return [
        Config(
            w.prompt_tokens,
            w.gen_tokens,
            {
                **server_params(w),
                "clients": n,
                "memory_interval_ms": w.memory_interval_ms,
                "request_timeout_s": w.request_timeout_s,
            },
        )
        for n in w.clients
    ]


engine_params = server_engine_params  # which server runs on each engine
