"""The quantization matrix: every format of a model on both engines, by speed, size and closeness to the original.

One row per (model, engine, artifact) of a sweep, joined from its perplexity jobs (perplexity, KL-divergence,
bits per weight, file size; from export records) and its generate jobs (prefill and decode tok/s, peak memory).
KL-divergence is shown against each engine's full-precision base: a row's own engine's is its ``kld_mean``, the
other's its ``cross_kld_mean``, so a Q4_K_M and an MLX 4-bit sit side by side against one original.

The frontier is what a user chooses from: the formats that no other format of the model beats on both size and
mean KLD against the reference base (the GGUF full precision where there is one: llama-perplexity's own base).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.table import Table

from siliconbench.contract.manifest import QUANT_LEVELS

ENGINE_LABEL = {"llama.cpp": "GGUF", "mlx": "MLX"}


@dataclass
class MatrixRow:
    model: str
    engine: str
    quant: str
    level: str
    format: str
    bits_per_weight: float | None = None
    size_bytes: float | None = None
    perplexity: float | None = None
    kld: dict[str, float] = field(default_factory=dict)  # base engine -> mean KLD
    kld_p99: float | None = None  # against the own engine's base
    same_top_pct: dict[str, float] = field(default_factory=dict)  # base engine -> %
    prefill_tps: float | None = None
    decode_tps: float | None = None
    peak_memory_bytes: int | None = None
    tensor_types: dict = field(default_factory=dict)
    frontier: bool = False


def _mean(r: dict, name: str) -> float | None:
    s = (r.get("metrics") or {}).get(name) or r.get(name)
    return s["mean"] if isinstance(s, dict) and s else None


def matrix_rows(records: list[dict]) -> dict[str, list[MatrixRow]]:
    """Rows by model, in level order (full, q8 ... q2), then engine; the frontier marked."""
    rows: dict[tuple, MatrixRow] = {}
    bases: dict[str, dict[str, str]] = {}
    for r in records:
        if r["status"] != "ok" or r["workload"] not in ("perplexity", "generate"):
            continue
        key = (r["model"], r["engine"], r["quant"])
        row = rows.setdefault(
            key,
            MatrixRow(
                r["model"],
                r["engine"],
                r["quant"],
                r["quant_level"],
                f"{r['quant']} ({ENGINE_LABEL.get(r['engine'], r['engine'])})",
            ),
        )
        extra = r.get("extra") or {}
        if r["workload"] == "perplexity":
            row.format = extra.get("format") or row.format
            row.bits_per_weight = extra.get("bits_per_weight")
            row.size_bytes = _mean(r, "file_size_bytes")
            row.perplexity = _mean(r, "perplexity")
            row.tensor_types = extra.get("tensor_types") or {}
            for role, prefix in (("same", ""), ("cross", "cross_")):
                base = (extra.get("kld") or {}).get(role)
                if base and _mean(r, f"{prefix}kld_mean") is not None:
                    row.kld[base["engine"]] = _mean(r, f"{prefix}kld_mean")
                    row.same_top_pct[base["engine"]] = _mean(r, f"{prefix}same_top_pct")
                    bases.setdefault(r["model"], {})[base["engine"]] = base["quant"]
            row.kld_p99 = _mean(r, "kld_p99")
        else:  # generate: the speed columns; several lengths or processes keep the first seen
            row.prefill_tps = row.prefill_tps or _mean(r, "prefill_tps")
            row.decode_tps = row.decode_tps or _mean(r, "decode_tps")
            row.peak_memory_bytes = row.peak_memory_bytes or r.get("peak_memory_bytes")
    out: dict[str, list[MatrixRow]] = {}
    for row in sorted(
        rows.values(), key=lambda x: (x.model, _level_rank(x.level), -(x.bits_per_weight or 0), x.engine)
    ):
        out.setdefault(row.model, []).append(row)
    for model_rows in out.values():
        mark_frontier(model_rows, reference_engine(model_rows))
    return out


def _level_rank(level: str) -> int:
    return QUANT_LEVELS.index(level) if level in QUANT_LEVELS else len(QUANT_LEVELS)


def reference_engine(rows: list[MatrixRow]) -> str | None:
    """The base every row is ranked against: llama.cpp's (the tool's own) where rows have it, else MLX's."""
    for engine in ("llama.cpp", "mlx"):
        if any(engine in r.kld for r in rows):
            return engine
    return None


def mark_frontier(rows: list[MatrixRow], engine: str | None) -> None:
    """Pareto frontier on (size, mean KLD against ``engine``'s base): no other row at most as big and at most as
    far from the original, and better on one of the two."""
    ranked = [r for r in rows if engine in r.kld and r.size_bytes]
    for r in ranked:
        r.frontier = not any(
            o is not r
            and o.size_bytes <= r.size_bytes
            and o.kld[engine] <= r.kld[engine]
            and (o.size_bytes < r.size_bytes or o.kld[engine] < r.kld[engine])
            for o in ranked
        )


def matrix_table(model: str, rows: list[MatrixRow]) -> Table:
    engines = [e for e in ("llama.cpp", "mlx") if any(e in r.kld for r in rows)]
    base_names = {e: next((r.quant for r in rows if r.engine == e and r.level == "full"), e) for e in engines}
    t = Table(
        title=f"{model}: every format, by speed, size and closeness to full precision (◆ = on the size/KLD frontier)",
        title_justify="left",
    )
    cols = [("Format", "left"), ("engine", "left"), ("bits/w", "right"), ("size", "right"), ("PPL", "right")]
    cols += [(f"KLD vs {base_names[e]} ({ENGINE_LABEL[e]})", "right") for e in engines]
    cols += [
        ("KLD p99", "right"),
        ("same top", "right"),
        ("prefill tok/s", "right"),
        ("decode tok/s", "right"),
        ("peak mem", "right"),
        ("", "left"),
    ]
    for name, just in cols:
        t.add_column(name, justify=just)
    for r in rows:
        t.add_row(
            r.format,
            r.engine,
            _f(r.bits_per_weight, "{:.2f}"),
            _f(r.size_bytes and r.size_bytes / 2**20, "{:,.1f} MiB"),
            _f(r.perplexity, "{:,.3f}"),
            *[_f(r.kld.get(e), "{:.5f}") for e in engines],
            _f(r.kld_p99, "{:.4f}"),
            _f(r.same_top_pct.get(r.engine), "{:.2f} %"),
            _f(r.prefill_tps, "{:,.0f}"),
            _f(r.decode_tps, "{:,.1f}"),
            _f(r.peak_memory_bytes and r.peak_memory_bytes / 2**20, "{:,.0f} MiB"),
            "◆" if r.frontier else "",
        )
    t.caption = (
        "KLD: mean KL-divergence of next-token distributions against each engine's full-precision form, "
        "on the same token ids (llama-perplexity --kl-divergence's definitions); same top: the share of "
        "positions where the format's most likely token is its own engine's base's."
    )
    t.caption_justify = "left"
    return t


def _f(v, fmt: str) -> str:
    return fmt.format(v) if v is not None else "—"
