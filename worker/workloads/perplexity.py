"""The perplexity workload: the quality cost of a quantization, on the text that ships with the project.

The shipped public-domain corpus (worker/models/data/corpus.txt) is tokenized whole by the engine's
own tokenizer; windows of ``window_tokens`` tokens are cut from it back to back from token
``offset_tokens``: the same token ids for both engines, since the two tokenizers are one vocabulary
(the job records a digest of the ids so that this can be checked, not assumed). Each window is scored
from an empty cache; one sample per window, and the text's perplexity over all of them.
"""

from __future__ import annotations

import hashlib
import json
import math
import time

from siliconbench.errors import WorkloadError
from siliconbench.manifest import size_path

from .common import Context, Outcome, SampleLog, corpus_text, done, engine_for, rss_now_bytes


def windows_of(ids: list[int], window: int, count: int, offset: int) -> list[list[int]]:
    """``count`` consecutive non-overlapping windows from ``offset``; WorkloadError if the text is too short."""
    need = offset + window * count
    if need > len(ids):
        raise WorkloadError(f"the text has {len(ids)} tokens with this tokenizer; offset_tokens {offset} + "
                            f"windows {count} x window_tokens {window} = {need} do not fit")
    return [ids[offset + i * window: offset + (i + 1) * window] for i in range(count)]


def format_label(ctx: Context) -> str:
    """How the reference names a format: 'Q4_K_M (llama.cpp)', 'MLX 4-bit (group 64)', 'f32 (MLX)'."""
    job = ctx.job
    if job.engine == "llama.cpp":
        return f"{job.quant} (llama.cpp)"
    config = json.loads((ctx.artifact / "config.json").read_text())
    q = config.get("quantization") or config.get("quantization_config")
    if q:
        return f"MLX {q.get('bits')}-bit (group {q.get('group_size')})"
    return f"{job.quant} (MLX)"


def run(ctx: Context) -> Outcome:
    job, p = ctx.job, ctx.job.params
    window, count = p["window_tokens"], p["windows"]
    engine = engine_for(job, {**job.engine_options, "logits_all": True})
    baseline = rss_now_bytes()
    t = time.perf_counter()
    engine.load(ctx.artifact, {**job.engine_options, "logits_all": True}, n_ctx=window + 16)
    load_s = time.perf_counter() - t
    ctx.emit("loaded", load_s=load_s)
    ids = engine.tokenize(corpus_text())
    chunks = windows_of(ids, window, count, p["offset_tokens"])
    log = SampleLog()
    total_nll, scored = 0.0, 0
    for i, chunk in enumerate(chunks):
        nll = engine.token_nll(chunk)
        if not all(math.isfinite(x) for x in nll):
            raise WorkloadError(f"window {i}: the engine returned non-finite log-likelihoods")
        total_nll += sum(nll)
        scored += len(nll)
        log.add({"window_nll": sum(nll) / len(nll)})
        ctx.emit("window", index=i)
    done(ctx, 0, False)  # the job's one repetition: all windows
    log.add({"perplexity": math.exp(total_nll / scored), "file_size_bytes": size_path(ctx.artifact)})
    used = [t for c in chunks for t in c]
    extra = {"format": format_label(ctx), "text": p["text"], "text_tokens": len(ids), "scored_tokens": scored,
             "tokens_sha256": hashlib.sha256(json.dumps(used).encode()).hexdigest(), "n_ctx": window + 16}
    outcome = Outcome(samples=log.samples, engine=engine, extra=extra, load_s=load_s, baseline_memory_bytes=baseline)
    engine.close()
    return outcome
