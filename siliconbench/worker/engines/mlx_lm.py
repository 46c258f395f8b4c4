"""MLX through mlx-lm: Metal on a Mac, the CPU build on Linux."""

from __future__ import annotations

import contextlib
import gc
import os
from importlib.metadata import version
from pathlib import Path

import numpy as np

from siliconbench.contract.settings import env_setting

from siliconbench.worker import platform
from siliconbench.worker.engines.base import Engine


def _device_info(mx) -> dict:
    return mx.device_info() if hasattr(mx, "device_info") else {}  # older mlx releases lack it


def gpu_backend(mx) -> str:
    """Which GPU backend MLX's gpu device is: CUDA (mlx-cuda) or Metal (a Mac). Ask CUDA first: mx.metal exists
    on every build and says False off a Mac."""
    cuda = getattr(mx, "cuda", None)
    if cuda is not None and cuda.is_available():
        return "CUDA"
    return "Metal"


class MlxEngine(Engine):
    name = "mlx"
    kv_source = "engine: sum of KVCache.nbytes (arrays as allocated, 256-token steps)"

    def load(self, path: Path, options: dict, n_ctx: int) -> None:
        import mlx.core as mx  # the engine: optional, imported by the job that runs it
        from mlx_lm import load  # the engine: optional, imported by the job that runs it
        from mlx_lm.generate import (  # the engine: optional, imported by the job that runs it
            generation_stream,
            wired_limit,
        )

        self.mx = mx
        self.stream = generation_stream
        # BLAS threads are set in the child's environment (siliconbench.worker.envs.blas) before MLX loads: record the effective count
        self.options = {**options, "blas_threads": int(os.environ.get("OPENBLAS_NUM_THREADS") or 0) or None}
        self.model, self.tokenizer = load(str(path))
        # mlx-lm loads lazily: force every weight resident so load time is the whole load.
        mx.eval(self.model.parameters())
        # mlx-lm's stream_generate and server run inside wired_limit() (Metal: the wired limit raised to the
        # device's recommended working set). Held here for the model's whole life in this process, so every
        # timed region runs as mlx-lm users' do; the limit in force is recorded (None: no GPU reports one).
        self._wired = contextlib.ExitStack()
        self._wired.enter_context(wired_limit(self.model, [generation_stream]))
        self.options["wired_limit_bytes"] = _device_info(mx).get("max_recommended_working_set_size")
        self.prefill_step = int(options.get("prefill_step_size", 2048))
        self.cache = None
        self._dtypes = self._read_dtypes()

    def vocab_size(self) -> int:
        """The tokenizer's size, as llama.cpp's n_vocab counts the GGUF's tokens: embedding rows beyond it are
        padding no tokenizer produces, and synthetic prompts must be drawn from the same range by both engines."""
        tok = getattr(self.tokenizer, "_tokenizer", None)
        if tok is not None:
            return len(tok)
        return int(self._n_vocab if getattr(self, "model", None) is None else self.model.args.vocab_size)

    def special_token_ids(self) -> set[int]:
        tok = self.tokenizer._tokenizer if hasattr(self.tokenizer, "_tokenizer") else self.tokenizer
        ids = set(getattr(tok, "all_special_ids", []) or [])
        ids |= set(getattr(self.tokenizer, "eos_token_ids", []) or [])
        # Added tokens are what llama.cpp's converter writes as CONTROL / USER_DEFINED: the same rule as the
        # llama.cpp adapter's (SmolLM2 has 17 such ids, only 3 of them in all_special_ids).
        ids |= set(getattr(tok, "added_tokens_decoder", {}) or {})
        return {int(i) for i in ids}

    def reset(self) -> None:
        from mlx_lm.models.cache import make_prompt_cache  # the engine: optional, imported by the job that runs it

        # A fresh cache per repetition, as each mlx_lm stream_generate call makes one; the allocator's buffer
        # cache is left as mlx_lm leaves it between trials (generate_step clears it after each prefill chunk).
        self.cache = make_prompt_cache(self.model)
        self.mx.reset_peak_memory()

    def _feed(self, tokens: list[int]) -> None:
        # The way mlx_lm.generate_step prefills: chunks through the model, evaluating only the cache.
        mx = self.mx
        with mx.stream(self.stream):
            for i in range(0, len(tokens), self.prefill_step):
                chunk = mx.array(tokens[i : i + self.prefill_step])
                self.model(chunk[None], cache=self.cache)
                mx.eval([c.state for c in self.cache])
                mx.clear_cache()

    def can_rewind(self) -> bool:
        from mlx_lm.models.cache import can_trim_prompt_cache  # the engine: optional, imported by the job that runs it

        return self.cache is not None and can_trim_prompt_cache(self.cache)

    def rewind(self, n_tokens: int) -> None:
        from mlx_lm.models.cache import trim_prompt_cache  # the engine: optional, imported by the job that runs it

        held = max((getattr(c, "offset", 0) for c in self.cache), default=0)
        if held > n_tokens:
            trim_prompt_cache(self.cache, held - n_tokens)

    def fill(self, tokens: list[int]) -> None:
        if tokens:
            self._feed(tokens)

    def prefill(self, tokens: list[int]):
        mx = self.mx
        self._feed(tokens[:-1])
        with mx.stream(self.stream):
            logits = self.model(mx.array(tokens[-1:])[None], cache=self.cache)[:, -1, :]
            mx.eval(logits)
        return logits

    def first_token(self, logits) -> int:
        mx = self.mx
        with mx.stream(self.stream):
            return int(mx.argmax(logits, axis=-1).item())

    def _step(self, y):
        logits = self.model(y[None], cache=self.cache)[:, -1, :]
        return self.mx.argmax(logits, axis=-1)

    def decode(self, token: int, n: int) -> int:
        # mlx_lm's pipelining: queue step i+1 before waiting on step i (async_eval).
        mx = self.mx
        with mx.stream(self.stream):
            y = self._step(mx.array([token]))
            mx.async_eval(y)
            for i in range(n):
                cur = y
                if i != n - 1:
                    y = self._step(cur)
                    mx.async_eval(y)
                last = int(cur.item())
        return last

    def load_vocab(self, path: Path) -> None:
        from mlx_lm.utils import load_tokenizer  # the engine: optional, imported by the job that runs it

        self.tokenizer = load_tokenizer(Path(path))
        self._n_vocab = len(self.tokenizer._tokenizer) if hasattr(self.tokenizer, "_tokenizer") else None

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def chat_template(self) -> str | None:
        # mlx_lm.server applies the template only where has_chat_template (else its own role-prefixed join)
        return self.tokenizer.chat_template if getattr(self.tokenizer, "has_chat_template", False) else None

    def detokenize(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens)

    def window_logits(self, tokens: list[int], first: int = 0) -> np.ndarray:
        mx = self.mx
        self.reset()
        with mx.stream(self.stream):
            # the whole window, as the llama.cpp adapter (and llama-perplexity): row i predicts token i + 1
            logits = self.model(mx.array(tokens)[None], cache=self.cache)[0, first:-1].astype(mx.float32)
            mx.eval(logits)
        return np.array(logits, dtype=np.float32)

    def perplexity_bos(self) -> int | None:
        """The BOS id when the tokenizer adds BOS (encode with special tokens puts it first), else None: the
        same question llama-perplexity asks the GGUF vocab (llama_vocab_get_add_bos)."""
        bos = getattr(self.tokenizer, "bos_token_id", None)
        if bos is None:
            return None
        with_special = list(self.tokenizer.encode("a", add_special_tokens=True))
        plain = list(self.tokenizer.encode("a", add_special_tokens=False))
        return int(bos) if with_special[:1] == [bos] and len(with_special) > len(plain) else None

    def kv_cache(self) -> dict[str, float]:
        caches = [c for c in self.cache if getattr(c, "keys", None) is not None]
        return {
            "bytes": float(sum(c.nbytes for c in caches)),  # the arrays as allocated (256-token steps)
            "dtype_bytes": float(caches[0].keys.dtype.size) if caches else 0.0,
            "tokens": float(caches[0].offset) if caches else 0.0,
        }

    def repetition_memory(self) -> dict[str, float]:
        mx = self.mx
        return {
            "mlx_peak_memory_bytes": float(mx.get_peak_memory()),
            "mlx_active_memory_bytes": float(mx.get_active_memory()),
            "mlx_cache_memory_bytes": float(mx.get_cache_memory()),
        }

    @staticmethod
    def probe() -> dict:
        import mlx.core as mx  # the engine: optional, imported by the probe's own interpreter

        dev = mx.default_device()
        gpu = "gpu" in str(dev).lower()
        out = {
            "version": version("mlx-lm"),
            "backend": gpu_backend(mx) if gpu else "CPU",
            "gpu_offload": gpu,
            "build": f"mlx {version('mlx')}, device {dev}",
        }
        if gpu:
            info = _device_info(mx)
            out["gpu"] = str(info.get("device_name") or info.get("architecture") or "")
        return out

    def describe(self) -> dict:
        import mlx.core as mx  # the engine: optional, imported by the job that runs it

        dev = mx.default_device()
        backend = gpu_backend(mx) if "gpu" in str(dev).lower() else "CPU"
        blas = env_setting("mlx_blas") or ("bundled" if platform.current().name == "Linux" else "Accelerate")
        return {
            "packages": {"mlx": version("mlx"), "mlx-lm": version("mlx-lm")},
            # device_info: on Metal the GPU architecture (e.g. applegpu_g15s), device name, memory size and
            # recommended working set; on the CPU build the CPU's architecture and name.
            "engine_build": {
                "mlx_device": str(dev),
                **{k if k.startswith("device") else f"device_{k}": str(v) for k, v in _device_info(mx).items()},
            },
            "backend": backend,
            "blas": blas,
            "engine_options": getattr(self, "options", {}),
            "dtypes": self.dtypes(),
        }

    def dtypes(self) -> dict[str, str]:
        return dict(getattr(self, "_dtypes", {}))  # empty when no model was loaded (server workloads)

    def _read_dtypes(self) -> dict[str, str]:
        """Weights: '4bit' / '8bit' for a quantized model, else the parameters' dtype; activations: the dtype
        the model computes in (its norm weights', which mlx-lm keeps unquantized); KV cache: the activations'."""
        model = self.model
        from mlx.utils import tree_flatten  # the engine: optional, imported by the job that runs it

        short = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
        params = dict(tree_flatten(model.parameters()))
        act = next((v.dtype for k, v in params.items() if k.endswith("norm.weight")), None)
        act_name = short.get(str(act).removeprefix("mlx.core."), str(act))
        # ModelArgs drops the config's quantization: the quantized layers carry their bits
        bits = next((m.bits for _, m in model.named_modules() if hasattr(m, "bits")), None)
        # mlx-lm's KVCache stores keys and values in the dtype the attention produced them in: the activations'
        return {"weights": f"{bits}bit" if bits else act_name, "activations": act_name, "kv_cache": act_name}

    def close(self) -> None:
        if getattr(self, "_wired", None) is not None:
            self._wired.close()  # restores the previous wired limit after synchronizing the stream
            self._wired = None
        self.model = self.cache = None
        gc.collect()  # the arrays go only when nothing refers to them; then the allocator's cache is emptied
        if hasattr(self, "mx"):
            self.mx.clear_cache()
