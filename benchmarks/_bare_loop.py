"""The baseline of benchmarks/fidelity.py: the engine called directly, no siliconbench harness.

Run as `python benchmarks/_bare_loop.py ENGINE PATH N_PROMPT N_GEN REPS SEED` (llama.cpp: the library's
default threads, as siliconbench uses when a sweep sets none); prints one JSON line
{"prefill_tps": [...], "decode_tps": [...]} with one value per repetition (first one dropped as warmup).
"""

import json
import random
import sys
import time


def prompt_ids(vocab: int, avoid: set, n: int, seed: int) -> list[int]:
    rng, out = random.Random(seed), []
    while len(out) < n:
        t = rng.randrange(vocab)
        if t not in avoid:
            out.append(t)
    return out


def llama(path, n_prompt, n_gen, reps, seed):
    import llama_cpp
    import numpy as np

    llm = llama_cpp.Llama(model_path=path, n_ctx=n_prompt + n_gen + 16, n_batch=2048, verbose=False)
    ctx, vocab = llm._ctx.ctx, llm.n_vocab()
    v = llama_cpp.llama_model_get_vocab(llm._model.model)
    avoid = {t for t in range(vocab) if llama_cpp.llama_vocab_is_control(v, t) or llama_cpp.llama_vocab_is_eog(v, t)}
    out = {"prefill_tps": [], "decode_tps": []}
    for r in range(reps + 1):
        prompt = prompt_ids(vocab, avoid, n_prompt, (seed * 100_003 + r) * 2)
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        llama_cpp.llama_synchronize(ctx)
        t1 = time.perf_counter()
        tok = int(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(vocab,)).argmax())
        t2 = time.perf_counter()
        for _ in range(n_gen):
            llm.eval([tok])
            tok = int(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(vocab,)).argmax())
        t3 = time.perf_counter()
        if r:
            out["prefill_tps"].append(n_prompt / (t1 - t0))
            out["decode_tps"].append(n_gen / (t3 - t2))
    return out


def mlx(path, n_prompt, n_gen, reps, seed):
    import mlx.core as mx
    from mlx_lm import load
    from mlx_lm.generate import generate_step

    model, tok = load(path)
    vocab = model.args.vocab_size
    avoid = set(tok._tokenizer.all_special_ids) | set(tok.eos_token_ids)
    out = {"prefill_tps": [], "decode_tps": []}
    for r in range(reps + 1):
        prompt = mx.array(prompt_ids(vocab, avoid, n_prompt, (seed * 100_003 + r) * 2))
        # mlx_lm.benchmark's way: the first yield ends prefill, the next n_gen yields are decode steps.
        t0 = time.perf_counter()
        for i, (y, _) in enumerate(generate_step(prompt, model, max_tokens=n_gen + 1)):
            if i == 0:
                t1 = time.perf_counter()
        t3 = time.perf_counter()
        if r:
            out["prefill_tps"].append(n_prompt / (t1 - t0))
            out["decode_tps"].append(n_gen / (t3 - t1))
    return out


if __name__ == "__main__":
    engine, path, n_prompt, n_gen, reps, seed = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
    fn = llama if engine == "llama.cpp" else mlx
    print(json.dumps(fn(path, n_prompt, n_gen, reps, seed)))
