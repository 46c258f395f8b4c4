"""The interface every engine adapter implements; the generate workload times calls to it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any


class Engine(ABC):
    """One loaded model in one engine. Every method returns only after the engine has synchronized,
    so a wall clock around a call times exactly the work of that call."""

    name: str

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

    # Used by the workloads beyond generate (swap, restart, concurrent, long_context, perplexity).

    @abstractmethod
    def load_vocab(self, path: Path) -> None:
        """Load only the tokenizer of a model (no weights): enough for tokenize, detokenize and the ids above."""

    @abstractmethod
    def tokenize(self, text: str) -> list[int]:
        """Token ids of text, with no BOS or other special token added."""

    @abstractmethod
    def detokenize(self, tokens: list[int]) -> str: ...

    @abstractmethod
    def token_nll(self, tokens: list[int]) -> list[float]:
        """Negative log-likelihood (nats) of tokens[1:], each given the tokens before it, from a fresh cache."""

    @abstractmethod
    def kv_cache(self) -> dict[str, float]:
        """The KV cache after the last evaluation: {"bytes": as the engine reports it, "dtype_bytes": per element,
        "tokens": positions held}."""

    def close(self) -> None:
        """Free the model (the child process exits right after; this keeps the order explicit)."""
