"""swap: model A (the job's model and quantization) loaded and warm; then unload A, load B, first token of B. Run by
siliconbench/worker/workloads/swap.py."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveInt

from ..engines import describe
from ..errors import UserError
from .base import CTX_SLACK, Config, Strict, fits

LABEL = ("to_model", "to_quant", "cache", "mmap")  # the params a job's one-line label shows (JobSpec.label)
FACTS = frozenset(
    {"cache_requested", "cache_evict_supported", "mmap", "a_artifact", "b_artifact", "a_load_s_untimed", "n_ctx"}
)


class SwapWorkload(Strict):
    """Model A (the job's model and quantization) loaded and warm; then unload A, load B, first token of B."""

    kind: Literal["swap"] = "swap"
    to_quant: str = Field(min_length=1, description="Quantization of model B (a level or an exact name)")
    to_model: str | None = Field(None, description="Model B; default: the job's own model (a quantization swap)")
    cache: Annotated[list[Literal["cold", "warm"]], Field(min_length=1)] = Field(
        ["cold", "warm"], description="Page-cache state of B's files asked for before each swap (measured, too)"
    )
    mmap: Annotated[list[bool], Field(min_length=1)] = Field(
        [True, False],
        description="Engines with an mmap switch (llama.cpp): load both models with mmap on / off; the others run once",
    )
    prompt_tokens: PositiveInt = Field(64, description="Prompt length of B's first request")
    # A quantization whose B is the very artifact A already is (q4 -> q4) is skipped: that is no swap.


def n_configs(w: SwapWorkload) -> int:
    return len(w.cache) * len(w.mmap)


def configs(w: SwapWorkload, at: str, m, catalog, engines: list[str]) -> list[Config]:
    target = catalog.get(w.to_model, field=f"{at}.to_model") if w.to_model else m
    if not any(target.artifact_for(e, w.to_quant) for e in engines):
        raise UserError(
            f"{at}.to_quant",
            f"model {target.name!r} has no artifact for {w.to_quant!r} for engines {', '.join(engines)}.",
            target.quant_names(),
        )
    fits(w.prompt_tokens + CTX_SLACK, target, f"{at}.prompt_tokens", "prompt_tokens + slack")
    return [
        Config(w.prompt_tokens, 1, {"to_model": target.name, "to_quant": w.to_quant, "cache": c, "mmap": mm})
        for c in w.cache
        for mm in w.mmap
    ]


def engine_params(
    w: SwapWorkload,
    at: str,
    cfg: Config,
    engine: str,
    model: str,
    art,
    catalog,
    full: tuple[str, bool] | None = None,
    engines: tuple[str, ...] = (),
) -> dict | None:
    """The job's params on ``engine`` with artifact ``art``, or None when the configuration does not apply (no B
    for this engine, B is A, or an mmap setting an engine without the switch does not have).

    ``full`` is the expansion's (dtype, exact) for level ``full`` (jobs.full_dtype_of): a swap to ``full`` takes
    B from the same matched pair as the sweep's own ``full`` (F32 with f32 here, F16 with f16 on a Mac)."""
    takes_mmap = describe(engine).takes_mmap
    if not takes_mmap and cfg.params["mmap"] != w.mmap[0]:  # runs once, with mmap recorded as None
        return None
    target = catalog.get(cfg.params["to_model"], field=f"{at}.to_model")
    if full is not None and cfg.params["to_quant"].lower() == "full":
        b = target.full_pair(engines or (engine,), full[0], exact=full[1]).get(engine)
    else:
        b = target.artifact_for(engine, cfg.params["to_quant"])
    if b is None or (target.name == model and b.path == art.path):
        return None  # no B for this engine, or B is the model already loaded
    rel = catalog.artifact_path(target.name, b, field=f"{at}.to_model").relative_to(catalog.models_dir)
    return {
        **cfg.params,
        "to_quant": b.quant,
        "to_artifact": str(rel),
        "to_sha256": b.sha256,
        "mmap": cfg.params["mmap"] if takes_mmap else None,
    }
