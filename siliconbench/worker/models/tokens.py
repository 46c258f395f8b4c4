"""Do llama.cpp and mlx-lm turn the same text into the same token ids? Asked of each engine's own tokenizer.

llama.cpp reads the GGUF's ``tokenizer.ggml.*`` keys (a vocab-only load, no weights); mlx-lm loads the
folder's Hugging Face tokenizer as it does for a job. The check text mixes prose, digits, code, whitespace
and non-Latin scripts, where pre-tokenizers and byte fallbacks differ.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from siliconbench.worker.models.make.tokenizer import CORPUS_PATH

CHECK_TEXT = (
    "It was the best of times, it was the worst of times.  Leading spaces, tabs\tand\nnew lines; numbers "
    "1234567 and 3.14! don't won't they're I'll we've. Unicode: café, naïve, 東京, Ελληνικά, emoji 🙂 — done.\n"
    "def f(x):\n    return x ** 2  # squares\n"
)


def check_text() -> str:
    corpus = CORPUS_PATH.read_text(encoding="utf-8")[:4000] if CORPUS_PATH.is_file() else ""
    return CHECK_TEXT + corpus


@contextlib.contextmanager
def _stderr_silenced():
    """File descriptor 2 to /dev/null for the block (the engine's native code writes there, not to sys.stderr)."""
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def llama_ids(gguf: Path, text: str) -> tuple[list[int], dict]:
    from llama_cpp import Llama  # the engine's own tokenizer is the point of the check

    with _stderr_silenced():  # a vocab-only load has no context length: llama.cpp warns n_ctx_seq > n_ctx_train (0)
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


def form_ids(path: Path, fmt: str, text: str) -> tuple[list[int], dict]:
    """The ids of ``text`` by the tokenizer of one form: a GGUF's (llama.cpp) or a folder's (mlx-lm)."""
    return llama_ids(path, text) if fmt == "gguf" else mlx_ids(path, text)


def difference(a: tuple[list[int], dict], b: tuple[list[int], dict], a_name: str, b_name: str) -> str | None:
    """None where two tokenizations are the same ids (and BOS/EOS); else one sentence saying where not."""
    (a, ainfo), (b, binfo) = a, b
    if a != b:
        i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))

        def show(ids: list[int], info: dict) -> str:
            return ", ".join(f"{t} {info['pieces'].get(t, '')!r}" for t in ids[i : i + 3]) or "end"

        return (
            f"{a_name} and {b_name} tokenize the check text differently ({len(a)} vs {len(b)} tokens): first "
            f"difference at token {i}: {a_name} [{show(a, ainfo)}] vs {b_name} [{show(b, binfo)}]."
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
                f"{k.upper()} id is {ainfo['special'][k]} for {a_name} and {binfo['special'][k]} for {b_name}"
                for k in diffs
            )
            + "."
        )
    return None
