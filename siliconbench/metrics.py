"""The metric registry: the one written definition of every metric's timed region, unit and direction.

Every figure siliconbench records is named here. Reports, exports, comparisons and the dashboard look
metrics up by name instead of hard-coding units or which way is better.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    better: Literal["higher", "lower"]
    scope: Literal["repetition", "job"]  # one sample per measured repetition, or one value per job
    region: str  # what the timed region contains, in one paragraph

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"


_DEFS = [
    Metric(
        "prefill_tps", "tokens/s", "higher", "repetition",
        "n_prompt / prefill time. Prefill time runs from handing the engine the prompt's token ids "
        "(synthetic ids: no tokenization exists to include) until the logits of the last prompt position "
        "are computed and synchronized (llama.cpp: llama_decode of the prompt batches + llama_synchronize; "
        "MLX: the prompt through the model with mx.eval of the KV cache and last-position logits). "
        "Excludes sampling and the depth tokens, which are evaluated untimed before it.",
    ),
    Metric(
        "decode_tps", "tokens/s", "higher", "repetition",
        "n_gen / decode time. Decode time covers n_gen single-token forward passes after the first token, "
        "each followed by greedy argmax selection of the next token id (sampling included; it is one argmax "
        "over the vocabulary). EOS is ignored, so exactly n_gen tokens are decoded. No detokenization.",
    ),
    Metric(
        "ttft_ms", "ms", "lower", "repetition",
        "Time to first token: from handing the engine the prompt's token ids until the first generated "
        "token id is on the host (prefill time + one greedy argmax). Tokenization is excluded (none exists).",
    ),
    Metric(
        "engine_prefill_tps", "tokens/s", "higher", "repetition",
        "llama.cpp's own perf counters for the same prefill: n_p_eval / t_p_eval_ms, read after "
        "llama_synchronize and reset before each repetition. Absent for MLX, which keeps no such counters.",
    ),
    Metric(
        "engine_decode_tps", "tokens/s", "higher", "repetition",
        "llama.cpp's own perf counters for the same decode: n_eval / t_eval_ms (synchronized, reset per repetition).",
    ),
    Metric(
        "mlx_peak_memory_bytes", "bytes", "lower", "repetition",
        "MLX allocator peak (mx.get_peak_memory) during one repetition, reset before it. MLX only.",
    ),
    Metric(
        "load_s", "s", "lower", "job",
        "Model load: from the call that opens the model file until the weights are resident and the engine "
        "can evaluate (llama.cpp: Llama(...) incl. context creation; MLX: mlx_lm.load + mx.eval of every "
        "parameter, since MLX loads lazily). Process start-up and imports are excluded.",
    ),
    Metric(
        "peak_memory_bytes", "bytes", "lower", "job",
        "Peak resident set size of the job's own fresh child process (getrusage ru_maxrss) over the whole "
        "job: interpreter, engine import, model load, warmup and all repetitions.",
    ),
    Metric(
        "baseline_memory_bytes", "bytes", "lower", "job",
        "Resident set size of the child process after importing the engine and before loading the model; "
        "peak_memory_bytes minus this is what the model and its runs added.",
    ),
]

METRICS: dict[str, Metric] = {m.name: m for m in _DEFS}
REPETITION_METRICS = [m.name for m in _DEFS if m.scope == "repetition"]
JOB_METRICS = [m.name for m in _DEFS if m.scope == "job"]


def get(name: str) -> Metric:
    try:
        return METRICS[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRICS)}") from None
