"""llama.cpp through llama-cpp-python: Metal on a Mac, the CPU build elsewhere."""

from __future__ import annotations

import contextlib
import ctypes
import re
from importlib.metadata import version
from pathlib import Path

import numpy as np

from siliconbench.contract.errors import EngineError

from siliconbench.worker.engines import engine_log
from siliconbench.worker.engines.base import Engine
from siliconbench.worker.engines.llama_threadpool import LLAMA_BENCH_POLL, Threadpools
from siliconbench.worker.platform.threads import performance_cores

# llama-bench's -ctk/-ctv names (ggml_type_from_name) -> ggml_type, and bytes per element for the KV arithmetic.
KV_TYPES = {
    "f32": (0, 4.0),
    "f16": (1, 2.0),
    "bf16": (30, 2.0),
    "q8_0": (8, 34 / 32),
    "q4_0": (2, 18 / 32),
    "q4_1": (3, 20 / 32),
    "iq4_nl": (20, 18 / 32),
    "q5_0": (6, 22 / 32),
    "q5_1": (7, 24 / 32),
}
SAMPLING = ("auto", "backend", "host")  # engine_options.sampling: where the greedy choice of the next token runs
FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}  # LLAMA_FLASH_ATTN_TYPE_AUTO / DISABLED / ENABLED
OFFLOADED = re.compile(r"offloaded (\d+/\d+) layers to GPU")
BUFFER = re.compile(r"(\S+) (model|KV|compute) buffer size =\s*([\d.]+) MiB")


def _backend(info: dict, offload: bool) -> str:
    """The backend a run used: the build's GPU backend where layers were offloaded, else the CPU."""
    sysinfo = info.get("system_info", "").upper()
    return "Metal" if offload and "METAL" in sysinfo else "CUDA" if offload and "CUDA" in sysinfo else "CPU"


def build_info() -> dict[str, str]:
    """The llama.cpp build llama-cpp-python carries (commit, versions, system info)."""
    import llama_cpp  # the engine: optional, imported by the job that runs it
    from llama_cpp import llama_cpp as lib  # the engine: optional, imported by the job that runs it

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


def flash_attn_mode(value) -> str:
    """'auto' | 'on' | 'off' from the option (sweeps written before 'auto' existed said true/false)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value or "auto")


@contextlib.contextmanager
def _context_flash_attn(flash_attn_type: int, log: list[str]):
    """Create the next llama_context with ``flash_attn_type`` and collect llama.cpp's log while it is made.

    llama-cpp-python's ``Llama`` only knows flash attention on/off, while llama.cpp's own default (and
    llama-bench's) is AUTO, resolved when the context is created and reported only in the log
    ("Flash Attention enabled" / "... not supported, set to disabled"). So for the one constructor call, the
    context class Llama uses sets the type we ask for, and a log callback keeps what llama.cpp said.
    """
    from llama_cpp import (
        _internals as internals,  # the engine: optional, imported by the job that runs it
        _logger,  # the engine: optional, imported by the job that runs it
        llama_cpp as lib,  # the engine: optional, imported by the job that runs it
    )

    original = internals.LlamaContext

    class Context(original):
        def __init__(self, *, model, params, verbose=True):
            params.flash_attn_type = flash_attn_type
            super().__init__(model=model, params=params, verbose=verbose)

    @lib.llama_log_callback
    def keep(level, text, user_data):
        log.append(text.decode(errors="replace"))
        engine_log.line(log[-1])

    internals.LlamaContext = Context
    lib.llama_log_set(keep, ctypes.c_void_p(0))
    try:
        yield
    finally:
        internals.LlamaContext = original
        lib.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))


@contextlib.contextmanager
def _engine_said(engine: str, path: Path):
    """An engine's failure to load carries what it said last (llama-cpp-python raises only 'Failed to load')."""
    try:
        yield
    except Exception as exc:
        raise EngineError(
            f"{engine} could not load {path.name}: {exc}; its last log lines: {engine_log.tail() or '(none)'}"
        ) from exc


def buffers(log: list[str]) -> dict[str, float]:
    """llama.cpp's allocations by device and kind from its load log ("CUDA0 model buffer size = 2100.00 MiB"),
    MiB: {"CUDA0 model": 2100.0, "CUDA0 KV": 64.0, "CPU compute": 8.0, ...}, summed where a kind repeats."""
    out: dict[str, float] = {}
    for text in log:
        for dev, kind, mib in BUFFER.findall(text):
            key = f"{dev} {kind}"
            out[key] = out.get(key, 0.0) + float(mib)
    return out


def offloaded_layers(log: list[str]) -> str | None:
    """'17/17' from llama.cpp's load log ("offloaded 17/17 layers to GPU"): what was offloaded, not asked for."""
    for text in log:
        m = OFFLOADED.search(text)
        if m:
            return m.group(1)
    return None


def resolved_flash_attn(log: list[str], requested: str) -> str:
    """'enabled' / 'disabled': what llama.cpp chose, from its context-creation log (AUTO is resolved there)."""
    if requested != "auto":
        return "enabled" if requested == "on" else "disabled"
    text = "".join(log).lower()
    if "flash attention" in text and "not supported" in text:
        return "disabled"
    if "flash attention enabled" in text:
        return "enabled"
    return "unknown"


class LlamaCppEngine(Engine):
    name = "llama.cpp"
    kv_source = "engine: llama_state_seq_get_size (used cells, F16 K/V)"

    def load(self, path: Path, options: dict, n_ctx: int) -> None:
        import llama_cpp  # the engine: optional, imported by the job that runs it

        self.lib = llama_cpp
        n_batch = int(options.get("n_batch", 2048))
        # llama-bench's default: the physical (performance) cores, for decode and batch alike.
        threads = int(options.get("threads") or performance_cores())
        fa = flash_attn_mode(options.get("flash_attn", "auto"))
        type_k, type_v = str(options.get("type_k", "f16")), str(options.get("type_v", "f16"))
        log: list[str] = []
        with _context_flash_attn(FLASH_ATTN[fa], log), _engine_said("llama.cpp", path):
            self.llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_batch=n_batch,
                n_ubatch=int(options.get("n_ubatch", 512)),
                n_threads=threads,
                n_threads_batch=threads,
                n_gpu_layers=int(options.get("n_gpu_layers", -1)),
                use_mmap=bool(options.get("use_mmap", True)),
                type_k=KV_TYPES[type_k][0],
                type_v=KV_TYPES[type_v][0],
                # logits of every position only where asked (perplexity): they cost n_ctx x vocab floats
                logits_all=bool(options.get("logits_all", False)),
                verbose=False,
            )
        self.ctx = self.llm._ctx.ctx
        self._buffers = buffers(log)
        # Persistent worker threads, as llama.cpp's own tools have (else ggml starts threads for every graph).
        self.pools = Threadpools(self.ctx, threads, threads, poll=LLAMA_BENCH_POLL)
        self.n_batch = n_batch
        self.kv_dtype_bytes = (KV_TYPES[type_k][1] + KV_TYPES[type_v][1]) / 2  # per element, K and V averaged
        self.options = {
            **options,
            "threads": self.llm.n_threads,
            "threads_batch": self.llm.n_threads_batch,
            "n_ctx": n_ctx,
            "flash_attn": fa,
            "flash_attn_effective": resolved_flash_attn(log, fa),
            # only on a build that can offload: a CPU build's results keep the identity they had
            **({"gpu_layers_offloaded": offloaded_layers(log)} if llama_cpp.llama_supports_gpu_offload() else {}),
            "type_k": type_k,
            "type_v": type_v,
            "threadpool": True,
            "poll": LLAMA_BENCH_POLL,
        }
        # One preallocated single-token batch for decode, as llama-bench's test_gen reuses its batch.
        self._one = llama_cpp.llama_batch_init(1, 0, 1)
        self._one.n_tokens = 1
        self._one.n_seq_id[0] = 1
        self._one.seq_id[0][0] = 0
        self._one.logits[0] = 1
        self.sampling = self._attach_sampler(str(options.get("sampling", "auto")), bool(options.get("logits_all")))
        self.options["sampling"] = self.sampling
        self._vocab_facts()
        self._dtypes = self._read_dtypes()  # now: describe() may come after close()

    def _attach_sampler(self, asked: str, logits_all: bool) -> str:
        """'backend': llama.cpp's greedy sampler attached to the context (llama_set_sampler), so the argmax runs in
        the model's graph on its backend and only the token id comes back, as llama-server --backend-sampling and as
        MLX's mx.argmax on the device: no logits copied, no host work per token. 'host': numpy's argmax over the
        logits buffer llama.cpp copies back. 'auto' (the default) is 'backend' where the build has
        llama_set_sampler and the model's layers run on a GPU, else 'host': on a CPU the logits are in host memory
        already and ggml's argmax in the graph cost 2-4 % of SmolLM2's decode step here against numpy's 0.2 %
        (docs/evidence/gpu-h100-2026-12-06). A job that needs every position's logits (logits_all) stays on the
        host."""
        if asked not in SAMPLING:
            raise EngineError(f"engine_options.sampling {asked!r}: one of {', '.join(SAMPLING)}")
        lib = self.lib
        self._sampler = None
        on_gpu = bool(lib.llama_supports_gpu_offload()) and int(self.options.get("n_gpu_layers", -1)) != 0
        if asked == "host" or (asked == "auto" and not on_gpu) or logits_all or not hasattr(lib, "llama_set_sampler"):
            if asked == "backend":
                raise EngineError(
                    "engine_options.sampling 'backend': this build (or a logits_all job) cannot sample there"
                )
            return "host"
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
        if not lib.llama_set_sampler(self.ctx, 0, chain):
            lib.llama_sampler_free(chain)
            if asked == "backend":
                raise EngineError("engine_options.sampling 'backend': llama_set_sampler refused the greedy sampler")
            return "host"
        self._sampler = chain
        return "backend"

    def _vocab_facts(self) -> None:
        lib = self.lib
        self.n_vocab = self.llm.n_vocab()
        vocab = lib.llama_model_get_vocab(self.llm._model.model)
        # The one rule (see Engine.special_token_ids): every id that is not an ordinary vocabulary entry —
        # control, end-of-generation, unknown, unused and user-defined (added) tokens.
        odd = (
            lib.LLAMA_TOKEN_ATTR_CONTROL
            | lib.LLAMA_TOKEN_ATTR_UNKNOWN
            | lib.LLAMA_TOKEN_ATTR_UNUSED
            | lib.LLAMA_TOKEN_ATTR_USER_DEFINED
        )
        self._special = {
            t
            for t in range(self.n_vocab)
            if lib.llama_vocab_get_attr(vocab, t) & odd or lib.llama_vocab_is_eog(vocab, t)
        }

    def load_vocab(self, path: Path) -> None:
        import llama_cpp  # the engine: optional, imported by the job that runs it

        self.lib = llama_cpp
        self.llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        self._vocab_facts()

    def tokenize(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text.encode(), add_bos=False, special=False))

    def chat_template(self) -> str | None:
        return self.llm.metadata.get("tokenizer.chat_template") or None  # the GGUF key llama-server reads

    def detokenize(self, tokens: list[int]) -> str:
        return self.llm.detokenize(tokens).decode(errors="replace")

    def window_logits(self, tokens: list[int], first: int = 0) -> np.ndarray:
        self.reset()
        # The whole window, as llama-perplexity evaluates it: a graph one token shorter gives logits ~1e-3 apart
        # (other kernel shapes), enough to move the tool's uint16 base rows and flip near-tied top tokens.
        self._eval(tokens)
        return np.array(self.llm.scores[first : len(tokens) - 1], dtype=np.float32)  # needs logits_all at load

    def perplexity_bos(self) -> int | None:
        """The BOS id when the vocab adds BOS (llama_vocab_get_add_bos, as llama-perplexity asks), else None."""
        vocab = self.lib.llama_model_get_vocab(self.llm._model.model)
        return int(self.lib.llama_vocab_bos(vocab)) if self.lib.llama_vocab_get_add_bos(vocab) else None

    def kv_cache(self) -> dict[str, float]:
        # The serialized state of sequence 0 is the K and V of its used cells, plus a few KB of cell metadata.
        used = self.lib.llama_memory_seq_pos_max(self.lib.llama_get_memory(self.ctx), 0) + 1
        return {
            "bytes": float(self.lib.llama_state_seq_get_size(self.ctx, 0)),
            "dtype_bytes": self.kv_dtype_bytes,
            "tokens": float(used),
        }

    def vocab_size(self) -> int:
        return self.n_vocab

    def special_token_ids(self) -> set[int]:
        return self._special

    def reset(self) -> None:
        self.llm.reset()  # Llama's own position counter (token_nll evaluates through Llama.eval)
        self.lib.llama_memory_clear(self.lib.llama_get_memory(self.ctx), False)  # as llama-bench, per repetition
        self.lib.llama_synchronize(self.ctx)
        self.lib.llama_perf_context_reset(self.ctx)

    def _eval(self, tokens: list[int]) -> None:
        self.llm.eval(tokens)
        # Counters and logits are booked only once the context synchronizes.
        self.lib.llama_synchronize(self.ctx)

    def _decode_batches(self, tokens: list[int]) -> None:
        """tokens in n_batch chunks through llama_decode, logits of the last position only: llama-bench's
        test_prompt (llama_batch_get_one places them after what the KV cache holds)."""
        lib = self.lib
        for i in range(0, len(tokens), self.n_batch):
            chunk = tokens[i : i + self.n_batch]
            arr = (lib.llama_token * len(chunk))(*chunk)
            if lib.llama_decode(self.ctx, lib.llama_batch_get_one(arr, len(chunk))) != 0:
                raise RuntimeError(f"llama_decode failed on a batch of {len(chunk)} tokens")
        lib.llama_synchronize(self.ctx)

    def can_rewind(self) -> bool:
        return True

    def rewind(self, n_tokens: int) -> None:
        lib = self.lib
        lib.llama_memory_seq_rm(lib.llama_get_memory(self.ctx), 0, n_tokens, -1)

    def fill(self, tokens: list[int]) -> None:
        if tokens:
            self._decode_batches(tokens)
            self.lib.llama_perf_context_reset(self.ctx)  # depth is untimed, for the engine's counters too

    def prefill(self, tokens: list[int]):
        self._decode_batches(tokens)
        # sampling on the backend copies no logits back: the step's graph chose the token (first_token reads it)
        return None if self._sampler is not None else self.lib.llama_get_logits_ith(self.ctx, -1)

    def first_token(self, logits) -> int:
        if self._sampler is not None:
            return int(self.lib.llama_get_sampled_token_ith(self.ctx, -1))
        return int(np.ctypeslib.as_array(logits, shape=(self.n_vocab,)).argmax())

    def decode(self, token: int, n: int) -> int:
        """n steps of llama-bench's test_gen loop (the preallocated one-token batch, llama_decode,
        llama_synchronize), each choosing the next token greedily: on the backend, in the step's own graph
        (sampling 'backend': only the id is read back), or by numpy's argmax over the logits llama.cpp copied back
        (sampling 'host': one view of the buffer, made again only if llama.cpp moves it)."""
        lib, one, ctx = self.lib, self._one, self.ctx
        decode, synchronize = lib.llama_decode, lib.llama_synchronize
        tokens, positions = one.token, one.pos
        pos = lib.llama_memory_seq_pos_max(lib.llama_get_memory(ctx), 0) + 1
        if self._sampler is not None:
            sampled = lib.llama_get_sampled_token_ith
            for _ in range(n):
                tokens[0], positions[0] = token, pos
                if decode(ctx, one) != 0:
                    raise RuntimeError(f"llama_decode failed at position {pos}")
                synchronize(ctx)
                token = sampled(ctx, -1)
                pos += 1
            return int(token)
        logits_at, view, at = self._logits_address(), None, None
        for _ in range(n):
            tokens[0], positions[0] = token, pos
            if decode(ctx, one) != 0:
                raise RuntimeError(f"llama_decode failed at position {pos}")
            synchronize(ctx)
            addr = logits_at(ctx, -1)
            if addr != at:
                view, at = np.frombuffer((ctypes.c_float * self.n_vocab).from_address(addr), dtype=np.float32), addr
            token = int(view.argmax())
            pos += 1
        return token

    def _logits_address(self):
        """llama_get_logits_ith returning the address as an int: a function object of its own, since the binding's
        shared one must keep its POINTER(c_float) result type."""
        fn = self.lib.llama_cpp._lib["llama_get_logits_ith"]
        fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_int32], ctypes.c_void_p
        return fn

    def counters(self) -> dict[str, float]:
        d = self.lib.llama_perf_context(self.ctx)
        out = {}
        if d.n_p_eval and d.t_p_eval_ms > 0:
            out["engine_prefill_tps"] = d.n_p_eval / (d.t_p_eval_ms / 1000.0)
        if d.n_eval and d.t_eval_ms > 0:
            out["engine_decode_tps"] = d.n_eval / (d.t_eval_ms / 1000.0)
        return out

    @staticmethod
    def probe() -> dict:
        info = build_info()
        offload = info.get("gpu_offload") == "True"
        return {
            "version": version("llama-cpp-python"),
            "backend": _backend(info, offload),
            "gpu_offload": offload,
            "build": f"llama.cpp build {info.get('commit') or info.get('version') or ''}",
        }

    def describe(self) -> dict:
        info = build_info()
        # The backend the job ran on, not what the build could do: no layer offloaded is a CPU run.
        offload = info.get("gpu_offload") == "True" and int(getattr(self, "options", {}).get("n_gpu_layers", -1)) != 0
        backend = _backend(info, offload)
        return {
            "packages": {"llama-cpp-python": version("llama-cpp-python")},
            "engine_build": info,
            "backend": backend,
            "engine_options": getattr(self, "options", {}),
            "dtypes": self.dtypes(),
        }

    def dtypes(self) -> dict[str, str]:
        return dict(getattr(self, "_dtypes", {}))  # empty when no model was loaded (server workloads)

    def memory_facts(self) -> dict:
        return {"llama_buffers_mib": self._buffers} if getattr(self, "_buffers", None) else {}

    def _read_dtypes(self) -> dict[str, str]:
        """The weights' storage type as llama.cpp names the file (llama_model_desc: "llama ?B F16" -> "F16"),
        activations f32 (ggml computes in f32 and converts for F16/quantized matmuls), the KV-cache types."""
        buf = ctypes.create_string_buffer(256)
        self.lib.llama_model_desc(self.llm._model.model, buf, len(buf))
        parts = buf.value.decode(errors="replace").split(" ", 2)
        opts = self.options
        kv = opts["type_k"] if opts["type_k"] == opts["type_v"] else f"{opts['type_k']}/{opts['type_v']}"
        return {"weights": parts[2] if len(parts) == 3 else "?", "activations": "f32", "kv_cache": kv}

    def close(self) -> None:
        if getattr(self, "_sampler", None) is not None:
            self.lib.llama_set_sampler(self.ctx, 0, None)
            self.lib.llama_sampler_free(self._sampler)
            self._sampler = None
        if getattr(self, "pools", None) is not None:
            self.pools.close()
        if getattr(self, "_one", None) is not None:
            self.lib.llama_batch_free(self._one)
            self._one = None
        self.llm.close()
