"""The GPU energy windows (siliconbench.worker.workloads.timing.energy_windows) on both real engines: a rewound cache
decodes exactly what the first pass decoded, from the same positions, and the window arithmetic divides the
counter's joules by every repeated token.

This machine has no GPU energy counter, so the counter here is the one stand-in: a board drawing a constant 300 W,
read from the clock (what NVML's nvmlDeviceGetTotalEnergyConsumption returns: mJ since an origin). The engines,
their caches and the repeated regions are real.
"""

from __future__ import annotations

import time

import pytest

from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.spec import parse_sweep

from siliconbench.worker.engines import get_engine
from siliconbench.worker.workloads.timing import energy_windows, synthetic_tokens
from tests.conftest import SMALL

WATTS = 300.0
DEPTH, PROMPT, GEN = 8, 16, 8


class ConstantBoard:
    """mJ since an origin at a constant draw, as the energy counter reads (integer mJ); keeps every reading so a test
    knows the joules each window held."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.readings: list[int] = []

    def energy_mj(self) -> int:
        self.readings.append(int((time.perf_counter() - self.t0) * WATTS * 1000))
        return self.readings[-1]


class Counted:
    """The real engine, its prefill and decode calls counted: how many repeats each window held, which on a loaded
    machine may be one."""

    def __init__(self, engine) -> None:
        self.engine, self.prefills, self.decodes = engine, 0, 0

    def prefill(self, tokens):
        self.prefills += 1
        return self.engine.prefill(tokens)

    def decode(self, first, n):
        self.decodes += 1
        return self.engine.decode(first, n)

    def __getattr__(self, name):
        return getattr(self.engine, name)


def _loaded(models_dir, engine_name: str):
    spec = parse_sweep(
        {
            "name": "energy",
            "models": [SMALL],
            "engines": [engine_name],
            "quantizations": ["F16" if engine_name == "llama.cpp" else "f32"],
            "workloads": [{"kind": "generate", "prompt_tokens": [PROMPT], "gen_tokens": [GEN]}],
        }
    )
    (job,) = expand(spec, ModelCatalog(models_dir))
    engine = get_engine(engine_name)
    engine.load(models_dir / job.artifact, job.engine_options, DEPTH + PROMPT + GEN + 8)
    return engine


@pytest.mark.parametrize("engine_name", ["llama.cpp", "mlx"])
def test_a_rewound_cache_decodes_the_same_tokens_from_the_same_positions(models_dir, engine_name):
    engine = _loaded(models_dir, engine_name)
    vocab, avoid = engine.vocab_size(), engine.special_token_ids()
    depth, prompt = synthetic_tokens(vocab, avoid, DEPTH, 1), synthetic_tokens(vocab, avoid, PROMPT, 2)
    engine.reset()
    engine.fill(depth)
    first = engine.first_token(engine.prefill(prompt))
    last = engine.decode(first, GEN)
    assert engine.can_rewind()
    engine.rewind(DEPTH + PROMPT)
    assert engine.decode(first, GEN) == last  # greedy from the same cache: the same path
    engine.rewind(DEPTH)
    assert engine.first_token(engine.prefill(prompt)) == first
    engine.close()


@pytest.mark.parametrize("engine_name", ["llama.cpp", "mlx"])
def test_the_windows_divide_the_joules_by_every_repeated_token(models_dir, engine_name):
    engine = _loaded(models_dir, engine_name)
    vocab, avoid = engine.vocab_size(), engine.special_token_ids()
    depth, prompt = synthetic_tokens(vocab, avoid, DEPTH, 1), synthetic_tokens(vocab, avoid, PROMPT, 2)
    engine.reset()
    engine.fill(depth)
    board, counted = ConstantBoard(), Counted(engine)
    out = energy_windows(counted, prompt, GEN, DEPTH, board, window_s=0.3)
    engine.close()
    # a constant draw reads as itself, whatever the number of repeats the window held
    assert out["prefill_gpu_watts"] == pytest.approx(WATTS, rel=0.05)
    assert out["decode_gpu_watts"] == pytest.approx(WATTS, rel=0.05)
    assert out["decode_tokens_per_j"] == pytest.approx(1 / out["decode_j_per_token"])
    # joules per token: each window's joules over every token it repeated (the prefill window's repeats are all the
    # prefills but the one that gives the decode its first token); read from the calls, so a loaded machine that fits
    # one repeat into the window checks the same arithmetic
    e0, e1, e2, e3 = board.readings
    prefills, decodes = counted.prefills - 1, counted.decodes
    assert prefills >= 1 and decodes >= 1
    assert (e1 - e0) / 1000 >= WATTS * 0.3 * 0.95 and (e3 - e2) / 1000 >= WATTS * 0.3 * 0.95  # windows of >= 0.3 s
    assert out["prefill_j_per_token"] == pytest.approx((e1 - e0) / 1000 / (prefills * PROMPT))
    assert out["decode_j_per_token"] == pytest.approx((e3 - e2) / 1000 / (decodes * GEN))
