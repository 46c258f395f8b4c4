"""The perplexity workload: the quality cost of a quantization, on the text that ships with the project.

The shipped public-domain corpus (siliconbench/worker/models/data/corpus.txt) is tokenized whole by the engine's
own tokenizer; windows of ``window_tokens`` tokens are cut from it back to back from token
``offset_tokens``: the same token ids for both engines, since the two tokenizers are one vocabulary
(the job records a digest of the ids so that this can be checked, not assumed). Each window is scored
from an empty cache; one sample per window, and the text's perplexity over all of them.

Two modes (params.mode), which tokens of an n-token window are scored:

- ``llama-perplexity`` (the default): llama.cpp's ``llama-perplexity -c n`` (tools/perplexity/perplexity.cpp,
  ``perplexity()``, the default ``--ppl`` path). Where the vocab adds BOS, the text is tokenized with BOS
  first and each window's first token is replaced by BOS; the window is evaluated whole and tokens
  first+1..n-1 (0-based, first = n/2) are scored: n - n/2 - 1 tokens a window. With offset_tokens 0 the
  windows are the tool's chunks 1..windows (``--chunks windows``) token for token.
- ``all-tokens``: no BOS; tokens 1..n-1 of each window scored, each from all tokens before it: what
  mlx_lm.perplexity's ``eval_ppl`` computes on windows of n tokens (its ``--sequence-length``). Results from
  before modes existed have no ``mode`` in their params and were computed this way.
"""

from __future__ import annotations

import hashlib
import json
import math
import time

from siliconbench.contract.engines import describe
from siliconbench.contract.errors import WorkloadError
from siliconbench.contract.manifest import size_path
from siliconbench.contract.workloads import CTX_SLACK

from siliconbench.worker.engines.base import nll_of
from siliconbench.worker.models.facts import form_facts
from siliconbench.worker.workloads import kld
from siliconbench.worker.workloads.common import (
    Context,
    Outcome,
    SampleLog,
    corpus_text,
    done,
    engine_for,
    rss_now_bytes,
)


def windows_of(ids: list[int], window: int, count: int, offset: int) -> list[list[int]]:
    """``count`` consecutive non-overlapping windows from ``offset``; WorkloadError if the text is too short."""
    need = offset + window * count
    if need > len(ids):
        raise WorkloadError(
            f"the text has {len(ids)} tokens with this tokenizer; offset_tokens {offset} + "
            f"windows {count} x window_tokens {window} = {need} do not fit"
        )
    return [ids[offset + i * window : offset + (i + 1) * window] for i in range(count)]


def format_label(ctx: Context) -> str:
    """How the reference names a format: 'Q4_K_M (llama.cpp)', 'MLX 4-bit (group 64)', 'f32 (MLX)'."""
    job = ctx.job
    if describe(job.engine).format == "gguf":
        return f"{job.quant} ({job.engine})"
    config = json.loads((ctx.artifact / "config.json").read_text())
    q = config.get("quantization") or config.get("quantization_config")
    if q:
        if job.quant != f"{q.get('bits')}bit" and not job.quant.startswith(f"{q.get('bits')}bit-g"):
            return f"MLX {job.quant} (group {q.get('group_size')})"  # a mixed recipe: its base width says little
        return f"MLX {q.get('bits')}-bit (group {q.get('group_size')})"
    return f"{job.quant} (MLX)"


def bos_for(engine, mode: str) -> int | None:
    """The id put first in llama-perplexity mode (None: the vocab adds no BOS, or mode all-tokens)."""
    return engine.perplexity_bos() if mode == "llama-perplexity" else None


def scored_windows(
    ids: list[int], mode: str, bos: int | None, window: int, count: int, offset: int
) -> tuple[list[list[int]], int]:
    """(the windows as evaluated, the position ``first`` whose logits predict the first scored token)."""
    if mode == "all-tokens":
        return windows_of(ids, window, count, offset), 0
    if bos is None:
        return windows_of(ids, window, count, offset), window // 2
    # llama-perplexity: common_tokenize(text, add_special=true) puts BOS first; each chunk's first token -> BOS
    chunks = windows_of([bos, *ids], window, count, offset)
    return [[bos, *c[1:]] for c in chunks], window // 2


def run(ctx: Context) -> Outcome:
    job, p = ctx.job, ctx.job.params
    window, count = p["window_tokens"], p["windows"]
    mode = p.get("mode", "all-tokens")  # jobs from before modes existed scored all tokens
    options = {**job.engine_options, "logits_all": True}
    vocab = engine_for(job, options)
    vocab.load_vocab(ctx.artifact)  # the ids and BOS first: a missing KLD base is computed from them
    ids = vocab.tokenize(p["text_body"] if "text_body" in p else corpus_text())  # the user's own text, or ours
    bos = bos_for(vocab, mode)
    vocab.close()
    chunks, first = scored_windows(ids, mode, bos, window, count, p["offset_tokens"])
    used = [t for c in chunks for t in c]
    tokens_sha = hashlib.sha256(json.dumps(used).encode()).hexdigest()
    bases = kld.BaseSet(ctx, p.get("kld_bases") or [], tokens_sha, first, chunks, n_ctx=window + CTX_SLACK)
    bases.prepare()  # every base this job does not itself produce, computed or read before its model loads
    engine = engine_for(job, options)
    baseline = rss_now_bytes()
    t = time.perf_counter()
    engine.load(ctx.artifact, options, n_ctx=window + CTX_SLACK)
    load_s = time.perf_counter() - t
    ctx.emit("loaded", load_s=load_s)
    log = SampleLog()
    total_nll, scored = 0.0, 0
    for i, chunk in enumerate(chunks):
        logits = engine.window_logits(chunk, first)
        nll = nll_of(logits, chunk[first + 1 :])
        if not all(math.isfinite(x) for x in nll):
            raise WorkloadError(f"window {i}: the engine returned non-finite log-likelihoods")
        total_nll += sum(nll)
        scored += len(nll)
        log.add({"window_nll": sum(nll) / len(nll), **bases.window(i, logits, chunk[first + 1 :])})
        ctx.emit("window", index=i)
    done(ctx, 0, False)  # the job's one repetition: all windows
    log.add({"perplexity": math.exp(total_nll / scored), "file_size_bytes": size_path(ctx.artifact), **bases.finish()})
    extra = {
        "format": format_label(ctx),
        "text": p["text"],
        "mode": mode,
        "bos": bos,
        "first_scored": first + 1,
        "text_tokens": len(ids),
        "scored_tokens": scored,
        "tokens_sha256": tokens_sha,
        "n_ctx": window + CTX_SLACK,
        **weights_facts(ctx),
    }
    if bases.bases:
        extra["kld"] = bases.describe()
    outcome = Outcome(samples=log.samples, engine=engine, extra=extra, load_s=load_s, baseline_memory_bytes=baseline)
    engine.close()
    return outcome


def weights_facts(ctx: Context) -> dict:
    """Bits per weight and a GGUF's tensors by type, from the files' headers: the size axis of a quantization
    table, and where a k-quant fell back for rows its blocks do not divide."""
    details = form_facts(ctx.artifact).details
    return {k: details[k] for k in ("bits_per_weight", "tensor_types", "quantization") if details.get(k) is not None}
