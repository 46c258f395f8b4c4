"""restart: the engine's own OpenAI-compatible server — start, ready, first streamed token, stop — repeated, with a
client's requests through it. Run by siliconbench/worker/workloads/restart.py."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt

from .base import SERVER_FACTS, Config, ServerSettings, fits, server_engine_params, server_params

LABEL = ("server",)  # the params a job's one-line label shows (JobSpec.label)
FACTS = SERVER_FACTS | {"unclean_stops", "traffic_interval_ms"}


class RestartWorkload(ServerSettings):
    """The engine's own OpenAI-compatible server: start -> ready -> first streamed token -> stop, repeated."""

    kind: Literal["restart"] = "restart"
    prompt_tokens: PositiveInt = 32
    gen_tokens: PositiveInt = 8
    client_interval_ms: PositiveInt | None = Field(
        250,
        description="A client sends a request this often throughout (None: no traffic); those that fail "
        "during a restart are counted",
    )


def n_configs(w: RestartWorkload) -> int:
    return 1


def configs(w: RestartWorkload, at: str, m, catalog, engines: list[str]) -> list[Config]:
    fits(w.prompt_tokens + w.gen_tokens, m, f"{at}.prompt_tokens", "prompt_tokens + gen_tokens")
    return [Config(w.prompt_tokens, w.gen_tokens, {**server_params(w), "client_interval_ms": w.client_interval_ms})]


engine_params = server_engine_params  # which server runs on each engine
