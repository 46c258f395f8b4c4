"""Workload kinds: their sweep settings, and how each expands into job configurations.

Each class is one member of the sweep's ``workloads`` union (spec.py), discriminated on ``kind``.
Settings that need the model (a depth beyond its context, a swap target it lacks) are checked by
``configs`` at expansion and raise UserError naming the field. What only a run can tell (a port in
use, a server that never becomes ready) becomes a failed job with the reason instead.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from .errors import UserError
from .engines import ENGINE_NAMES, describe
from .manifest import ModelCatalog, ModelManifest

Port = Annotated[int, Field(ge=1024, le=65535)]
Counts = Annotated[list[PositiveInt], Field(min_length=1)]
Lengths = Annotated[list[PositiveInt], Field(min_length=1)]
Depths = Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]
# Room the engines need past the tokens we ask for (BOS, the first generated token).
CTX_SLACK = 16


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GenerateWorkload(_Strict):
    """llama-bench's and mlx_lm.benchmark's test: a seeded synthetic prompt after ``depth`` untimed tokens, then
    greedy decode; one job per (prompt, gen, depth)."""

    kind: Literal["generate"] = "generate"
    prompt_tokens: Lengths = [512]
    gen_tokens: Lengths = [128]
    depth: Depths = [0]


class SwapWorkload(_Strict):
    """Model A (the job's model and quantization) loaded and warm; then unload A, load B, first token of B."""

    kind: Literal["swap"] = "swap"
    to_quant: str = Field(min_length=1, description="Quantization of model B (a level or an exact name)")
    to_model: str | None = Field(None, description="Model B; default: the job's own model (a quantization swap)")
    cache: Annotated[list[Literal["cold", "warm"]], Field(min_length=1)] = Field(
        ["cold", "warm"], description="Page-cache state of B's files asked for before each swap (measured, too)")
    mmap: Annotated[list[bool], Field(min_length=1)] = Field(
        [True, False], description="llama.cpp only: load both models with mmap on / off (MLX runs once)")
    prompt_tokens: PositiveInt = Field(64, description="Prompt length of B's first request")
    # A quantization whose B is the very artifact A already is (q4 -> q4) is skipped: that is no swap.


class ServerSettings(_Strict):
    ready_timeout_s: PositiveFloat = Field(120.0, description="A server not ready by then fails the job")
    stop_timeout_s: PositiveFloat = Field(10.0, description="Grace after SIGTERM before SIGKILL")
    port: Port | None = Field(None, description="Fixed port on 127.0.0.1; default: a free one, picked once per job")


class RestartWorkload(ServerSettings):
    """The engine's own OpenAI-compatible server: start -> ready -> first streamed token -> stop, repeated."""

    kind: Literal["restart"] = "restart"
    prompt_tokens: PositiveInt = 32
    gen_tokens: PositiveInt = 8
    client_interval_ms: PositiveInt | None = Field(
        250, description="A client sends a request this often throughout (None: no traffic); those that fail "
        "during a restart are counted")


class ConcurrentWorkload(ServerSettings):
    """N streaming clients at once against one server, one job per N."""

    kind: Literal["concurrent"] = "concurrent"
    clients: Counts = [1, 2, 4, 8]
    prompt_tokens: PositiveInt = 128
    gen_tokens: PositiveInt = 64
    memory_interval_ms: PositiveInt = Field(10, description="How often the server tree's RSS is sampled")
    request_timeout_s: PositiveFloat = 300.0


class LongContextWorkload(_Strict):
    """A prompt of `depth` tokens prefilled whole, then decode at that depth; KV-cache memory recorded."""

    kind: Literal["long_context"] = "long_context"
    depths: Counts = [1024, 4096]
    gen_tokens: PositiveInt = 32


PerplexityMode = Literal["llama-perplexity", "all-tokens"]


class PerplexityWorkload(_Strict):
    """Perplexity on the shipped public-domain text, in fixed non-overlapping token windows.

    ``mode`` says which tokens are scored (worker/workloads/perplexity.py, siliconbench.metrics):
    ``llama-perplexity`` (the default) is llama.cpp's tool's definition — BOS first where the vocab adds BOS,
    the second half of each window scored; ``all-tokens`` scores every token of a window after its first.
    """

    kind: Literal["perplexity"] = "perplexity"
    text: Literal["corpus"] = Field("corpus", description="worker/models/data/corpus.txt")
    mode: PerplexityMode = Field(
        "llama-perplexity", description="llama-perplexity: BOS first (where the vocab adds it), then 0-based tokens "
        "n/2+1..n-1 of each n-token window scored, as `llama-perplexity -c window_tokens`; all-tokens: tokens 1..n-1, "
        "no BOS, as mlx_lm.perplexity's eval_ppl")
    window_tokens: Annotated[int, Field(ge=2)] = 512
    windows: PositiveInt = 8
    offset_tokens: Annotated[int, Field(ge=0)] = Field(0, description="First token of the first window")
    kl_divergence: bool = Field(
        False, description="Also the KL-divergence of each format's next-token distributions against the model's "
        "full precision (llama-perplexity --kl-divergence's definitions), against each engine's full-precision "
        "form the model has: its own engine's (kld_*) and the other's (cross_kld_*)")


class MultiprocessWorkload(_Strict):
    """K engine processes on one host decoding at once, one job per K."""

    kind: Literal["multiprocess"] = "multiprocess"
    processes: Annotated[list[Annotated[int, Field(ge=1, le=64)]], Field(min_length=1)] = [1, 2, 4]
    prompt_tokens: PositiveInt = 64
    gen_tokens: PositiveInt = 64


KINDS: dict[str, type[BaseModel]] = {c.model_fields["kind"].default: c for c in (
    GenerateWorkload, SwapWorkload, RestartWorkload, ConcurrentWorkload, LongContextWorkload, PerplexityWorkload, MultiprocessWorkload)}


# The facts each kind's result carries in ``JobResult.extra`` beside its samples, by top-level key (what is under a
# key is the workload module's to say), and those every job's result may carry. A result whose extra holds a key not
# listed here is refused on write (siliconbench.results.contract_problems): a new fact is declared where its kind is.
COMMON_FACTS = frozenset({
    "workload",  # the kind, as run
    "thermal", "busy",  # the gates' records (worker/measure/gate.py)
    "model_notes",  # what the model's manifest says every result must carry (a tokenizer mismatch allowed)
    "device_memory",  # a CUDA host's NVML peak and what the engine says it allocated (Engine.memory_facts)
    "source", "llama_bench",  # a result imported from llama-bench's output: where from, and its record as read
})
FACTS: dict[str, frozenset[str]] = {
    "generate": frozenset({"n_ctx", "vocab_size", "prompt_ids_sha256", "roofline"}),
    "swap": frozenset({"cache_requested", "cache_evict_supported", "mmap", "a_artifact", "b_artifact",
                       "a_load_s_untimed", "n_ctx"}),
    "restart": frozenset({"unclean_stops", "n_ctx", "traffic_interval_ms", "server", "server_args", "ready_probe",
                          "request"}),
    "concurrent": frozenset({"clients", "ready_s", "stop_s", "clean_stop", "n_ctx", "memory_interval_ms",
                             "hwm_supported", "server", "server_args", "ready_probe", "request", "token_count_source",
                             "batching", "observed"}),
    "long_context": frozenset({"depth", "n_ctx", "kv_cache_source", "kv_tokens", "kv_dtype_bytes", "n_layers",
                               "n_kv_heads", "head_dim"}),
    "perplexity": frozenset({"format", "text", "mode", "bos", "first_scored", "text_tokens", "scored_tokens",
                             "tokens_sha256", "n_ctx", "bits_per_weight", "tensor_types", "quantization", "kld"}),
    "multiprocess": frozenset({"processes", "load_s_per_process", "n_ctx", "effective_options"}),
}
assert set(FACTS) == set(KINDS), "every kind declares its result facts"


@dataclass(frozen=True)
class Config:
    """One job configuration of a workload, before the engine is chosen."""

    n_prompt: int
    n_gen: int
    params: dict = field(default_factory=dict)
    n_depth: int = 0
    repetitions: int | None = None  # None: the sweep's
    warmup: int | None = None


def n_configs(w) -> int:
    """Upper bound of a workload's configurations, for the max_jobs check before expanding."""
    return {"generate": lambda: len(w.prompt_tokens) * len(w.gen_tokens) * len(w.depth),
            "swap": lambda: len(w.cache) * len(w.mmap), "concurrent": lambda: len(w.clients),
            "long_context": lambda: len(w.depths), "multiprocess": lambda: len(w.processes)}.get(w.kind, lambda: 1)()


def _fits(n: int, m: ModelManifest, where: str, what: str) -> None:
    if n > m.n_ctx:
        raise UserError(where, f"{what} = {n} tokens exceeds model {m.name!r}'s context of {m.n_ctx} tokens.")


def configs(w, wi: int, m: ModelManifest, catalog: ModelCatalog, engines: list[str]) -> list[Config]:
    """The configurations of workload ``w`` (``workloads[wi]``) on model ``m``; UserError for impossible ones."""
    at = f"workloads[{wi}]"

    def server() -> dict:
        # protocol 2: one identical request body for both servers (no seed, penalties off) and "ready" meaning
        # a completion was answered. Part of the job key, so results measured the old way are never pooled.
        return {"ready_timeout_s": w.ready_timeout_s, "stop_timeout_s": w.stop_timeout_s, "port": w.port,
                "protocol": 2}
    if w.kind == "generate":
        out = []
        for n_prompt, n_gen, depth in itertools.product(w.prompt_tokens, w.gen_tokens, w.depth):
            if depth + n_prompt + n_gen > m.n_ctx:
                raise UserError(at, f"depth {depth} + prompt_tokens {n_prompt} + gen_tokens {n_gen} exceeds model "
                                f"{m.name!r}'s context of {m.n_ctx} tokens.")
            out.append(Config(n_prompt, n_gen, n_depth=depth))
        return out
    if w.kind == "swap":
        target = catalog.get(w.to_model, field=f"{at}.to_model") if w.to_model else m
        if not any(target.artifact_for(e, w.to_quant) for e in engines):
            raise UserError(f"{at}.to_quant", f"model {target.name!r} has no artifact for {w.to_quant!r} for engines "
                            f"{', '.join(engines)}.", target.quant_names())
        _fits(w.prompt_tokens + CTX_SLACK, target, f"{at}.prompt_tokens", "prompt_tokens + slack")
        return [Config(w.prompt_tokens, 1, {"to_model": target.name, "to_quant": w.to_quant, "cache": c, "mmap": mm})
                for c in w.cache for mm in w.mmap]
    if w.kind == "restart":
        _fits(w.prompt_tokens + w.gen_tokens, m, f"{at}.prompt_tokens", "prompt_tokens + gen_tokens")
        return [Config(w.prompt_tokens, w.gen_tokens, {**server(), "client_interval_ms": w.client_interval_ms})]
    if w.kind == "concurrent":
        _fits(w.prompt_tokens + w.gen_tokens, m, f"{at}.prompt_tokens", "prompt_tokens + gen_tokens")
        return [Config(w.prompt_tokens, w.gen_tokens, {**server(), "clients": n, "memory_interval_ms": w.memory_interval_ms,
                                                       "request_timeout_s": w.request_timeout_s}) for n in w.clients]
    if w.kind == "long_context":
        for j, d in enumerate(w.depths):
            _fits(d + w.gen_tokens, m, f"{at}.depths[{j}]", f"depth {d} + gen_tokens {w.gen_tokens}")
        return [Config(d, w.gen_tokens, {"depth": d}) for d in w.depths]
    if w.kind == "perplexity":
        if m.synthetic:
            raise UserError(f"{at}.kind", f"model {m.name!r} has random weights (models make-synthetic): its "
                            "perplexity and KL-divergence mean nothing; measure them on a real model.")
        _fits(w.window_tokens, m, f"{at}.window_tokens", "window_tokens")
        if w.mode == "llama-perplexity" and w.window_tokens < 4:
            raise UserError(f"{at}.window_tokens", f"mode llama-perplexity scores 0-based tokens n/2+1..n-1 of each "
                            f"window: window_tokens = {w.window_tokens} leaves none; use 4 or more "
                            "(or mode all-tokens).")
        # protocol 2: each window evaluated whole, as llama-perplexity does (before: one token shorter, logits
        # ~1e-3 apart). Part of the job key, so figures measured the old way are never pooled with these.
        params = {"text": w.text, "mode": w.mode, "window_tokens": w.window_tokens, "windows": w.windows,
                  "offset_tokens": w.offset_tokens, "protocol": 2}
        if w.kl_divergence:
            params["kld_bases"] = kld_bases(m, catalog, f"{at}.kl_divergence")
        # Deterministic: the windows are the samples, so repetitions and warmup would only repeat them.
        return [Config(w.window_tokens, 0, params, repetitions=1, warmup=0)]
    if w.kind == "multiprocess":
        _fits(w.prompt_tokens + w.gen_tokens, m, f"{at}.prompt_tokens", "prompt_tokens + gen_tokens")
        return [Config(w.prompt_tokens, w.gen_tokens, {"processes": k}) for k in w.processes]
    raise AssertionError(f"no expansion for workload kind {w.kind!r}")


def kld_bases(m: ModelManifest, catalog: ModelCatalog, where: str) -> list[dict]:
    """The full-precision form of each engine the KL-divergence is measured against: the highest precision
    both share (f32, then f16, bf16), by content digest, so results against different bases never pool."""
    pair = m.full_pair(ENGINE_NAMES, "f32")
    bases = [{"engine": e, "quant": a.quant, "sha256": a.sha256,
              "artifact": str(catalog.artifact_path(m.name, a, field=where).relative_to(catalog.models_dir))}
             for e, a in pair.items() if a is not None]
    if not bases:
        raise UserError(where, f"model {m.name!r} has no full-precision form (F32/F16/BF16 GGUF or an unquantized "
                        "MLX folder) to measure the KL-divergence against; add one with `models add --to-existing`.")
    return bases


def engine_params(w, wi: int, cfg: Config, engine: str, model: str, art, catalog: ModelCatalog,
                  full: tuple[str, bool] | None = None, engines: tuple[str, ...] = ()) -> dict | None:
    """The job's params on ``engine`` with artifact ``art``, or None when the configuration does not apply.

    ``full`` is the expansion's (dtype, exact) for level ``full`` (jobs.full_dtype_of): a swap to ``full`` takes
    B from the same matched pair as the sweep's own ``full`` (F32 with f32 here, F16 with f16 on a Mac)."""
    if w.kind != "swap":
        return cfg.params
    takes_mmap = describe(engine).takes_mmap
    if not takes_mmap:  # an engine without an mmap switch runs once, with mmap recorded as None
        if cfg.params["mmap"] != w.mmap[0]:
            return None
    target = catalog.get(cfg.params["to_model"], field=f"workloads[{wi}].to_model")
    if full is not None and cfg.params["to_quant"].lower() == "full":
        b = target.full_pair(engines or (engine,), full[0], exact=full[1]).get(engine)
    else:
        b = target.artifact_for(engine, cfg.params["to_quant"])
    if b is None or (target.name == model and b.path == art.path):
        return None  # no B for this engine, or B is the model already loaded
    rel = catalog.artifact_path(target.name, b, field=f"workloads[{wi}].to_model").relative_to(catalog.models_dir)
    return {**cfg.params, "to_quant": b.quant, "to_artifact": str(rel), "to_sha256": b.sha256,
            "mmap": cfg.params["mmap"] if takes_mmap else None}
