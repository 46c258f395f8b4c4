"""perplexity: the shipped public-domain text (or the user's own) in fixed non-overlapping token windows, and optionally each window's
KL-divergence against the model's full precision. Run by siliconbench/worker/workloads/perplexity.py."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveInt

from ..engines import ENGINE_NAMES
from ..errors import UserError
from .base import Config, Strict, UserFile, fits, read_user_file

LABEL = ("windows", "window_tokens", "mode")  # the params a job's one-line label shows (JobSpec.label)
FACTS = frozenset(
    {
        "format",
        "text",
        "mode",
        "bos",
        "first_scored",
        "text_tokens",
        "scored_tokens",
        "tokens_sha256",
        "n_ctx",
        "bits_per_weight",
        "tensor_types",
        "quantization",
        "kld",
    }
)

PerplexityMode = Literal["llama-perplexity", "all-tokens"]


class PerplexityWorkload(Strict):
    """Perplexity on the shipped public-domain text, in fixed non-overlapping token windows.

    ``mode`` says which tokens are scored (siliconbench/worker/workloads/perplexity.py, siliconbench.contract.metrics):
    ``llama-perplexity`` (the default) is llama.cpp's tool's definition — BOS first where the vocab adds BOS,
    the second half of each window scored; ``all-tokens`` scores every token of a window after its first.
    """

    kind: Literal["perplexity"] = "perplexity"
    text: str = Field(
        "corpus",
        description="'corpus': the shipped public-domain text (siliconbench/worker/models/data/corpus.txt); or a UTF-8 text file of "
        "yours (a path; in a sweep file, relative to it), as `llama-perplexity -f FILE` and `mlx_lm.perplexity "
        "--data-path` take theirs. Its content travels with each job (a fleet's workers score the same text) and its "
        "sha256, not its name, is part of the job's identity; too short for the windows asked, the job fails with the "
        "text's token count.",
    )
    mode: PerplexityMode = Field(
        "llama-perplexity",
        description="llama-perplexity: BOS first (where the vocab adds it), then 0-based tokens "
        "n/2+1..n-1 of each n-token window scored, as `llama-perplexity -c window_tokens`; all-tokens: tokens 1..n-1, "
        "no BOS, as mlx_lm.perplexity's eval_ppl",
    )
    window_tokens: Annotated[int, Field(ge=2)] = 512
    windows: PositiveInt = 8
    offset_tokens: Annotated[int, Field(ge=0)] = Field(0, description="First token of the first window")
    kl_divergence: bool = Field(
        False,
        description="Also the KL-divergence of each format's next-token distributions against the model's "
        "full precision (llama-perplexity --kl-divergence's definitions), against each engine's full-precision "
        "form the model has: its own engine's (kld_*) and the other's (cross_kld_*)",
    )


def n_configs(w: PerplexityWorkload) -> int:
    return 1


def configs(w: PerplexityWorkload, at: str, m, catalog, engines: list[str]) -> list[Config]:
    if m.synthetic:
        raise UserError(
            f"{at}.kind",
            f"model {m.name!r} has random weights (models make-synthetic): its "
            "perplexity and KL-divergence mean nothing; measure them on a real model.",
        )
    fits(w.window_tokens, m, f"{at}.window_tokens", "window_tokens")
    if w.mode == "llama-perplexity" and w.window_tokens < 4:
        raise UserError(
            f"{at}.window_tokens",
            f"mode llama-perplexity scores 0-based tokens n/2+1..n-1 of each "
            f"window: window_tokens = {w.window_tokens} leaves none; use 4 or more (or mode all-tokens).",
        )
    # protocol 2: each window evaluated whole, as llama-perplexity does (before: one token shorter, logits
    # ~1e-3 apart). Part of the job key, so figures measured the old way are never pooled with these.
    params = {
        "text": w.text,
        "mode": w.mode,
        "window_tokens": w.window_tokens,
        "windows": w.windows,
        "offset_tokens": w.offset_tokens,
        "protocol": 2,
    }
    if w.text != "corpus":
        file = own_text(w.text, f"{at}.text")
        params.update(text=file.digest, text_body=file.text)
    if w.kl_divergence:
        params["kld_bases"] = kld_bases(m, catalog, f"{at}.kl_divergence")
    # Deterministic: the windows are the samples, so repetitions and warmup would only repeat them.
    return [Config(w.window_tokens, 0, params, repetitions=1, warmup=0)]


def own_text(path: str, where: str) -> UserFile:
    """The user's text file, read and checked now: a clear error naming the field, nothing half-made."""
    file = read_user_file(path, where, "a UTF-8 text file")
    if not file.text.strip():
        raise UserError(where, f"{path} is empty: there is nothing to score.")
    return file


def kld_bases(m, catalog, where: str) -> list[dict]:
    """The full-precision form of each engine the KL-divergence is measured against: the highest precision
    both share (f32, then f16, bf16), by content digest, so results against different bases never pool."""
    pair = m.full_pair(ENGINE_NAMES, "f32")
    bases = [
        {
            "engine": e,
            "quant": a.quant,
            "sha256": a.sha256,
            "artifact": str(catalog.artifact_path(m.name, a, field=where).relative_to(catalog.models_dir)),
        }
        for e, a in pair.items()
        if a is not None
    ]
    if not bases:
        raise UserError(
            where,
            f"model {m.name!r} has no full-precision form (F32/F16/BF16 GGUF or an unquantized "
            "MLX folder) to measure the KL-divergence against; add one with `models add --to-existing`.",
        )
    return bases
