"""long_context: a prompt of ``depth`` tokens prefilled whole, then decode at that depth; KV-cache memory recorded.
Run by siliconbench/worker/workloads/long_context.py."""

from __future__ import annotations

from typing import Literal

from pydantic import PositiveInt

from .base import Config, Counts, Strict, fits

LABEL = ("depth",)  # the params a job's one-line label shows (JobSpec.label)
FACTS = frozenset(
    {"depth", "n_ctx", "kv_cache_source", "kv_tokens", "kv_dtype_bytes", "n_layers", "n_kv_heads", "head_dim"}
)


class LongContextWorkload(Strict):
    """A prompt of `depth` tokens prefilled whole, then decode at that depth; KV-cache memory recorded."""

    kind: Literal["long_context"] = "long_context"
    depths: Counts = [1024, 4096]
    gen_tokens: PositiveInt = 32


def n_configs(w: LongContextWorkload) -> int:
    return len(w.depths)


def configs(w: LongContextWorkload, at: str, m, catalog, engines: list[str]) -> list[Config]:
    for j, d in enumerate(w.depths):
        fits(d + w.gen_tokens, m, f"{at}.depths[{j}]", f"depth {d} + gen_tokens {w.gen_tokens}")
    return [Config(d, w.gen_tokens, {"depth": d}) for d in w.depths]
