"""siliconbench's KL-divergence next to llama-perplexity's, on the same GGUF files and the same token windows,
and the cross-engine figures nobody else has.

    .venv/bin/python benchmarks/kld.py MODEL [WINDOW] [WINDOWS] [QUANT,QUANT,...]

For each GGUF form asked (default: every quantized GGUF of the model), our perplexity job with
``kl_divergence: true`` runs on llama.cpp, then llama-perplexity as a user runs it: ``--kl-divergence-base``
on the model's full-precision GGUF (the same base our job uses, params.kld_bases), then ``--kl-divergence``
on the quantized file, with the threads, batch and flash-attention our job recorded. Printed beside each other:
mean KLD (target: within 1 %), its 99th percentile, and the same-top-token count (target: equal). Then the MLX
forms' jobs: their KLD against their own f32 base and against the GGUF base (cross-engine).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIN_WINDOWS = 4  # measured with llama-perplexity of llama.cpp 0.3.36's tree: 3 windows print no summary
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.kld_tools import TARGET, rows  # noqa: E402


def print_rows(console, found: list[dict]) -> None:
    from rich.table import Table

    t = Table(
        title="KL-divergence against full precision: siliconbench beside llama-perplexity --kl-divergence "
        f"(target: mean within {TARGET:.0%}, same-top count equal)",
        title_justify="left",
    )
    for c in (
        "format",
        "bits/w",
        "base",
        "KLD mean",
        "tool",
        "ratio",
        "p99",
        "tool p99",
        "same top",
        "tool",
        "ok",
        "vs other engine's base",
    ):
        t.add_column(c, justify="left" if c in ("format", "base", "ok", "vs other engine's base") else "right")
    for r in found:
        tool = r.get("tool") or {}
        cross = r["cross"]
        t.add_row(
            f"{r['quant']} ({r['engine']})",
            f"{r['bits_per_weight'] or 0:.2f}",
            r["base"],
            f"{r['kld_mean']:.6f}",
            f"{tool['kld_mean']:.6f}" if tool else "—",
            f"{r['ratio']:.4f}" if tool else "—",
            f"{r['kld_p99']:.5f}",
            f"{tool['kld_p99']:.5f}" if tool.get("kld_p99") is not None else "—",
            f"{int(r['same_top_count'])}/{int(r['positions'])}",
            f"{tool['same_top_count']}/{int(r['positions'])}" if tool else "—",
            {True: "yes", False: "NO", None: ""}[r.get("within_target")],
            f"{cross['kld_mean']:.6f} vs {cross['engine']} {cross['quant']}, same top {cross['same_top_pct']:.1f} %"
            if cross
            else "—",
        )
    console.print(t)
    for cmd in dict.fromkeys(r["tool"]["cmd"] for r in found if r.get("tool")):
        console.print(f"[dim]{cmd}[/dim]")


if __name__ == "__main__":
    from rich.console import Console

    from siliconbench.contract.settings import load_settings

    from harness import tools as _tools

    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    windows = int(args[2]) if len(args) > 2 else 4
    if windows < MIN_WINDOWS:  # below it llama-perplexity prints the chunks but not the summary we compare with
        sys.exit(f"error in WINDOWS: {windows}; llama-perplexity --kl-divergence summarizes {MIN_WINDOWS} or more")
    found = rows(
        load_settings().resolved_models_dir,
        args[0],
        _tools.llama_tools_bin(),
        window=int(args[1]) if len(args) > 1 else 512,
        windows=windows,
        quants=args[3].split(",") if len(args) > 3 else None,
    )
    print_rows(Console(width=220), found)
