"""The interface every engine adapter implements; the generate workload times calls to it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy only where an engine runs: this module is imported by every worker and CLI process
    import numpy as np


def nll_of(logits: np.ndarray, targets: list[int]) -> list[float]:
    """NLL of each target from its row of float32 logits: log-softmax in float64."""
    import numpy as np

    x = np.asarray(logits, dtype=np.float64)
    top = x.max(axis=1, keepdims=True)
    logz = np.log(np.exp(x - top).sum(axis=1)) + top[:, 0]
    return list(logz - x[np.arange(len(x)), targets])


class Engine(ABC):
    """One loaded model in one engine. Every method returns only after the engine has synchronized,
    so a wall clock around a call times exactly the work of that call."""

    name: str
    kv_source: str  # how kv_cache() gets its bytes, recorded with the long_context results

    @abstractmethod
    def load(self, path: Path, options: dict, n_ctx: int) -> None:
        """Load weights so the next call can evaluate at once (no lazy loading left)."""

    @abstractmethod
    def vocab_size(self) -> int: ...

    @abstractmethod
    def special_token_ids(self) -> set[int]:
        """Ids synthetic prompts never contain, by one rule for every engine: each id that is not an ordinary
        entry of the vocabulary (control, end-of-generation, unknown, unused, added/user-defined tokens).
        With the same vocabulary the two engines give the same set, hence the same prompts (their digest is
        stored with each result: extra.prompt_ids_sha256)."""

    @abstractmethod
    def reset(self) -> None:
        """Empty the KV cache and the engine's own counters before a repetition."""

    @abstractmethod
    def fill(self, tokens: list[int]) -> None:
        """Evaluate tokens into the KV cache without producing output (untimed depth)."""

    @abstractmethod
    def prefill(self, tokens: list[int]) -> Any:
        """Evaluate the prompt; return a handle to the last position's logits, already computed."""

    @abstractmethod
    def first_token(self, logits: Any) -> int:
        """Greedy token id from prefill logits, on the host."""

    @abstractmethod
    def decode(self, token: int, n: int) -> int:
        """n single-token forward passes starting from ``token``, greedy, EOS ignored; last token id."""

    def can_rewind(self) -> bool:
        """Whether ``rewind`` works here (the energy windows repeat a region from the same position with it)."""
        return False

    def rewind(self, n_tokens: int) -> None:
        """Keep the KV cache's first ``n_tokens`` positions and drop the rest (n_tokens 0: empty it)."""
        raise NotImplementedError(f"{self.name} cannot rewind its cache")

    def counters(self) -> dict[str, float]:
        """The engine's own timing counters for the last repetition, in registry metric names."""
        return {}

    def repetition_memory(self) -> dict[str, float]:
        """Engine-reported memory for the last repetition, in registry metric names."""
        return {}

    @abstractmethod
    def describe(self) -> dict:
        """packages, engine_build, backend, blas and the effective options, for the Environment.

        Also callable with no model loaded (server workloads): then ``self.options`` is whatever the
        caller set, defaulting to none."""

    @staticmethod
    @abstractmethod
    def probe() -> dict:
        """What `doctor` reports of the engine on this host, with no model: {"version", "backend" (Metal / CUDA /
        CPU), "gpu_offload", and a one-line "build" detail}; run in a fresh interpreter, as a job's child is."""

    # Used by the workloads beyond generate (swap, restart, concurrent, long_context, perplexity).

    @abstractmethod
    def load_vocab(self, path: Path) -> None:
        """Load only the tokenizer of a model (no weights): enough for tokenize, detokenize and the ids above."""

    @abstractmethod
    def tokenize(self, text: str) -> list[int]:
        """Token ids of text, with no BOS or other special token added."""

    @abstractmethod
    def chat_template(self) -> str | None:
        """The model's own chat template as this engine reads it (after load_vocab), or None where it has none: its
        server would then join chat messages some default way of its own, which the serve workload refuses."""

    @abstractmethod
    def detokenize(self, tokens: list[int]) -> str: ...

    @abstractmethod
    def window_logits(self, tokens: list[int], first: int = 0) -> np.ndarray:
        """(len(tokens) - 1 - first, vocab) float32 logits of positions first..n-2, each predicting the next token,
        all from one evaluation of the window from a fresh cache (synchronized)."""

    def token_nll(self, tokens: list[int], first: int = 0) -> list[float]:
        """Negative log-likelihood (nats) of tokens[first + 1:], each given all tokens before it, from a fresh
        cache: log-softmax of the engine's float32 logits, in float64 (the same arithmetic for every engine)."""
        return nll_of(self.window_logits(tokens, first), tokens[first + 1 :])

    @abstractmethod
    def kv_cache(self) -> dict[str, float]:
        """The KV cache after the last evaluation: {"bytes": as the engine reports it, "dtype_bytes": per element,
        "tokens": positions held}."""

    def memory_facts(self) -> dict:
        """What the engine says it allocated (llama.cpp's model / KV / compute buffers per device), for the
        result's extra beside the measured peaks; {} where it says nothing."""
        return {}

    def close(self) -> None:  # noqa: B027 -- a default no-op, not abstract: an engine with nothing to free keeps it
        """Free the model (the child process exits right after; this keeps the order explicit)."""
