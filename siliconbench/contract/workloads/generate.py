"""generate: llama-bench's and mlx_lm.benchmark's test — a seeded synthetic prompt after ``depth`` untimed tokens,
then greedy decode; one job per (prompt, gen, depth). Run by siliconbench/worker/workloads/generate.py."""

from __future__ import annotations

import itertools
from typing import Literal

from ..errors import UserError
from .base import Config, Depths, Lengths, Strict

# "tool": a job on a llama.cpp build measured through its own llama-bench (what llama-bench said of itself)
FACTS = frozenset({"n_ctx", "vocab_size", "prompt_ids_sha256", "roofline", "tool"})


class GenerateWorkload(Strict):
    kind: Literal["generate"] = "generate"
    prompt_tokens: Lengths = [512]
    gen_tokens: Lengths = [128]
    depth: Depths = [0]


def n_configs(w: GenerateWorkload) -> int:
    return len(w.prompt_tokens) * len(w.gen_tokens) * len(w.depth)


def configs(w: GenerateWorkload, at: str, m, catalog, engines: list[str]) -> list[Config]:
    out = []
    for n_prompt, n_gen, depth in itertools.product(w.prompt_tokens, w.gen_tokens, w.depth):
        if depth + n_prompt + n_gen > m.n_ctx:
            raise UserError(
                at,
                f"depth {depth} + prompt_tokens {n_prompt} + gen_tokens {n_gen} exceeds model "
                f"{m.name!r}'s context of {m.n_ctx} tokens.",
            )
        out.append(Config(n_prompt, n_gen, n_depth=depth))
    return out
