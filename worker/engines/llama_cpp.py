"""llama.cpp through llama-cpp-python: Metal on a Mac, the CPU build elsewhere."""

from __future__ import annotations

import ctypes
from importlib.metadata import version
from pathlib import Path

from .base import Engine


def build_info() -> dict[str, str]:
    """The llama.cpp build llama-cpp-python carries (commit, versions, system info)."""
    import llama_cpp
    from llama_cpp import llama_cpp as lib

    info = {}
    for sym in ("ggml_commit", "ggml_version"):
        try:
            fn = getattr(lib._lib, sym)
            fn.restype = ctypes.c_char_p
            info[sym.removeprefix("ggml_")] = fn().decode()
        except (AttributeError, OSError):
            continue
    try:
        info["llama_version"] = str(lib.llama_version().decode() if hasattr(lib, "llama_version") else "")
    except Exception:  # older builds lack the symbol; the commit above is what identifies a build
        pass
    info["system_info"] = llama_cpp.llama_print_system_info().decode().strip()
    info["gpu_offload"] = str(bool(llama_cpp.llama_supports_gpu_offload()))
    return info


class LlamaCppEngine(Engine):
    name = "llama.cpp"

    def load(self, path: Path, options: dict, n_ctx: int) -> None:
        import llama_cpp
        import numpy as np

        self.lib, self.np = llama_cpp, np
        n_batch = int(options.get("n_batch", 2048))
        # Unset threads: llama-cpp-python's own defaults (half the cores to decode, all to prefill), what
        # its users get; all cores for decode collapses under any contention on a small machine.
        threads = options.get("threads")
        thread_args = {"n_threads": threads, "n_threads_batch": threads} if threads else {}
        self.llm = llama_cpp.Llama(
            model_path=str(path), n_ctx=n_ctx, n_batch=n_batch, n_ubatch=int(options.get("n_ubatch", 512)),
            **thread_args, n_gpu_layers=int(options.get("n_gpu_layers", -1)),
            use_mmap=bool(options.get("use_mmap", True)), flash_attn=bool(options.get("flash_attn", False)),
            # logits of every position only where asked (perplexity): they cost n_ctx x vocab floats
            logits_all=bool(options.get("logits_all", False)), verbose=False,
        )
        self.ctx = self.llm._ctx.ctx
        self.options = {**options, "threads": self.llm.n_threads, "threads_batch": self.llm.n_threads_batch, "n_ctx": n_ctx}
        self._vocab_facts()

    def _vocab_facts(self) -> None:
        lib = self.lib
        self.n_vocab = self.llm.n_vocab()
        vocab = lib.llama_model_get_vocab(self.llm._model.model)
        self._special = {t for t in range(self.n_vocab)
                         if lib.llama_vocab_is_control(vocab, t) or lib.llama_vocab_is_eog(vocab, t)}

    def load_vocab(self, path: Path) -> None:
        import llama_cpp

        self.lib = llama_cpp
        self.llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        self._vocab_facts()

    def tokenize(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text.encode(), add_bos=False, special=False))

    def detokenize(self, tokens: list[int]) -> str:
        return self.llm.detokenize(tokens).decode(errors="replace")

    def token_nll(self, tokens: list[int]) -> list[float]:
        np = self.np
        self.reset()
        self._eval(tokens[:-1])  # position i's logits predict token i + 1
        logits = np.asarray(self.llm.scores[: len(tokens) - 1], dtype=np.float64)  # needs logits_all at load
        top = logits.max(axis=1, keepdims=True)
        logz = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]
        return list(logz - logits[np.arange(len(tokens) - 1), tokens[1:]])

    def kv_cache(self) -> dict[str, float]:
        # The serialized state of sequence 0 is the K and V of its used cells, plus a few KB of cell metadata.
        used = self.lib.llama_memory_seq_pos_max(self.lib.llama_get_memory(self.ctx), 0) + 1
        return {"bytes": float(self.lib.llama_state_seq_get_size(self.ctx, 0)), "dtype_bytes": 2.0,  # F16 default
                "tokens": float(used)}

    def vocab_size(self) -> int:
        return self.n_vocab

    def special_token_ids(self) -> set[int]:
        return self._special

    def reset(self) -> None:
        self.llm.reset()  # n_tokens = 0; the next eval drops the whole KV cache
        self.lib.llama_synchronize(self.ctx)
        self.lib.llama_perf_context_reset(self.ctx)

    def _eval(self, tokens: list[int]) -> None:
        self.llm.eval(tokens)
        # Counters and logits are booked only once the context synchronizes (measured-facts.md).
        self.lib.llama_synchronize(self.ctx)

    def fill(self, tokens: list[int]) -> None:
        if tokens:
            self._eval(tokens)
            self.lib.llama_perf_context_reset(self.ctx)  # depth is untimed, for the engine's counters too

    def prefill(self, tokens: list[int]):
        self._eval(tokens)
        return self.lib.llama_get_logits_ith(self.ctx, -1)

    def first_token(self, logits) -> int:
        return int(self.np.ctypeslib.as_array(logits, shape=(self.n_vocab,)).argmax())

    def decode(self, token: int, n: int) -> int:
        for _ in range(n):
            self._eval([token])
            token = self.first_token(self.lib.llama_get_logits_ith(self.ctx, -1))
        return token

    def counters(self) -> dict[str, float]:
        d = self.lib.llama_perf_context(self.ctx)
        out = {}
        if d.n_p_eval and d.t_p_eval_ms > 0:
            out["engine_prefill_tps"] = d.n_p_eval / (d.t_p_eval_ms / 1000.0)
        if d.n_eval and d.t_eval_ms > 0:
            out["engine_decode_tps"] = d.n_eval / (d.t_eval_ms / 1000.0)
        return out

    def describe(self) -> dict:
        info = build_info()
        offload = info.get("gpu_offload") == "True"
        sysinfo = info.get("system_info", "")
        backend = "Metal" if "METAL" in sysinfo.upper() and offload else ("CUDA" if "CUDA" in sysinfo.upper() and offload else "CPU")
        return {
            "packages": {"llama-cpp-python": version("llama-cpp-python")},
            "engine_build": info,
            "backend": backend,
            "engine_options": getattr(self, "options", {}),
        }

    def close(self) -> None:
        self.llm.close()
