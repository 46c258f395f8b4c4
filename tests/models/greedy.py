"""Each engine's own logits and greedy tokens for the same ids, and the check that two greedy runs agree."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def llama(path: Path, n_ctx: int = 512):
    from llama_cpp import Llama

    return Llama(model_path=str(path), n_ctx=n_ctx, logits_all=True, verbose=False, seed=0)


def llama_logits(llm, ids: list[int]) -> np.ndarray:
    llm.reset()
    llm.eval(ids)
    return np.array(llm.scores[: len(ids)])


def llama_greedy(llm, ids: list[int], n: int) -> list[int]:
    llm.reset()
    llm.eval(ids)
    out = []
    for _ in range(n):
        out.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
        llm.eval([out[-1]])
    return out


def mlx_logits(model, ids: list[int]) -> np.ndarray:
    import mlx.core as mx

    return np.array(model(mx.array([ids]))[0].astype(mx.float32))


def mlx_greedy(model, tok, ids: list[int], n: int) -> list[int]:
    from mlx_lm import stream_generate
    from mlx_lm.sample_utils import make_sampler

    return [r.token for r in stream_generate(model, tok, prompt=ids, max_tokens=n, sampler=make_sampler(temp=0.0))]


def assert_same_greedy(mlx_out: list[int], llama_out: list[int], eos: int) -> None:
    # mlx-lm stops at EOS; llama_greedy does not.
    assert mlx_out == llama_out[: len(mlx_out)]
    if len(mlx_out) < len(llama_out):
        assert mlx_out[-1] == eos
