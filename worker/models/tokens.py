"""Do llama.cpp and mlx-lm turn the same text into the same token ids? Asked of each engine's own tokenizer.

llama.cpp reads the GGUF's ``tokenizer.ggml.*`` keys (a vocab-only load, no weights); mlx-lm loads the
folder's Hugging Face tokenizer as it does for a job. The check text mixes prose, digits, code, whitespace
and non-Latin scripts, where pre-tokenizers and byte fallbacks differ.
"""

from __future__ import annotations

from pathlib import Path

from worker.models.make.tokenizer import CORPUS_PATH

CHECK_TEXT = (
    "It was the best of times, it was the worst of times.  Leading spaces, tabs\tand\nnew lines; numbers "
    "1234567 and 3.14! don't won't they're I'll we've. Unicode: café, naïve, 東京, Ελληνικά, emoji 🙂 — done.\n"
    "def f(x):\n    return x ** 2  # squares\n"
)


def check_text() -> str:
    corpus = CORPUS_PATH.read_text(encoding="utf-8")[:4000] if CORPUS_PATH.is_file() else ""
    return CHECK_TEXT + corpus


def llama_ids(gguf: Path, text: str) -> tuple[list[int], dict]:
    from llama_cpp import Llama  # the engine's own tokenizer is the point of the check

    llm = Llama(model_path=str(gguf), vocab_only=True, verbose=False)
    try:
        ids = llm.tokenize(text.encode(), add_bos=False, special=False)
        special = {"bos": llm.token_bos(), "eos": llm.token_eos()}
        pieces = {i: llm.detokenize([i]).decode("utf-8", "replace") for i in set(ids)}
    finally:
        llm.close()
    return ids, {"special": special, "pieces": pieces}


def mlx_ids(folder: Path, text: str) -> tuple[list[int], dict]:
    from mlx_lm.utils import load_tokenizer  # the engine's own tokenizer is the point of the check

    tok = load_tokenizer(Path(folder))
    ids = list(tok.encode(text, add_special_tokens=False))
    eos = tok.eos_token_id
    special = {"bos": tok.bos_token_id, "eos": eos}
    pieces = {i: tok.decode([i]) for i in set(ids)}
    return ids, {"special": special, "pieces": pieces}


def compare_tokenizers(gguf: Path, folder: Path, text: str | None = None) -> str | None:
    """None where both engines give the same ids (and the same BOS/EOS); else one sentence saying where not."""
    text = text or check_text()
    a, ainfo = llama_ids(gguf, text)
    b, binfo = mlx_ids(folder, text)
    if a != b:
        i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        show = lambda ids, info: ", ".join(f"{t} {info['pieces'].get(t, '')!r}" for t in ids[i : i + 3]) or "end"  # noqa: E731
        return (
            f"llama.cpp and mlx-lm tokenize the check text differently ({len(a)} vs {len(b)} tokens): first "
            f"difference at token {i}: llama.cpp [{show(a, ainfo)}] vs mlx-lm [{show(b, binfo)}]."
        )
    diffs = [
        k
        for k in ("bos", "eos")
        if ainfo["special"][k] is not None
        and binfo["special"][k] is not None
        and ainfo["special"][k] != binfo["special"][k]
    ]
    if diffs:
        return (
            "; ".join(
                f"{k.upper()} id is {ainfo['special'][k]} for llama.cpp and {binfo['special'][k]} for mlx-lm"
                for k in diffs
            )
            + "."
        )
    return None
