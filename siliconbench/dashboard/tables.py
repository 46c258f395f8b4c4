"""The Compare page's tables and series names, shaped from the SQL aggregates (no statistics computed here).

A series is one identity (identity_hash): one bar, one box, one point. Labels are made unique, so two
identities that look alike (an OS update, other engine options) are never drawn as one.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from siliconbench.contract.aggregate import Summary, stability_warnings
from siliconbench.contract.manifest import weights_of
from siliconbench.contract.metrics import METRICS

PUBLISHED = {
    "prefill_tps": "prompt tok/s",
    "decode_tps": "generation tok/s",
    "decode_bandwidth_pct": "% of memory bandwidth",
    "ttft_ms": "TTFT ms",
    "peak_memory_bytes": "memory peak",
}


def _unique(rows: list[dict], key: str, cell) -> None:
    """Append the identity hash to ``key`` where two identities would share one place (``cell``)."""
    seen = Counter((r[key], cell(r)) for r in rows)
    for r in rows:
        if seen[(r[key], cell(r))] > 1:
            r[key] = f"{r[key]} #{r['identity_hash'][:6]}"


def label_series(rows: list[dict]) -> list[dict]:
    """Add ``config`` (what is compared: model, precision, lengths, host) and ``series`` (who: the engine
    and its version), unique per identity within a configuration."""
    for r in rows:
        lengths = f"p{r['n_prompt']} g{r['n_gen']} d{r['n_depth']}"
        r["config"] = f"{r['model']} {r['quant_level']} · {lengths} · {r['hostname']}"
        r["series"] = f"{r['engine']} {r['engine_version'] or '?'}"
    _unique(rows, "series", lambda r: r["config"])
    return rows


def with_lines(rows: list[dict], x: str) -> list[dict]:
    """Add ``line``: the series across values of ``x`` (n_prompt or n_depth), every other length fixed."""
    other = {"n_prompt": ("n_gen", "n_depth"), "n_depth": ("n_prompt", "n_gen")}[x]
    short = {"n_prompt": "p", "n_gen": "g", "n_depth": "d"}
    for r in rows:
        lengths = " ".join(f"{short[k]}{r[k]}" for k in other)
        who = f"{r['engine']} {r['engine_version'] or '?'}"
        r["line"] = f"{who} · {r['model']} {r['quant_level']} {lengths} · {r['hostname']}"
    _unique(rows, "line", lambda r: r[x])
    return rows


def _pm(s: dict | None, metric: str) -> str:
    if not s:
        return "—"
    if METRICS[metric].unit == "bytes":
        return f"{s['mean'] / 2**20:,.0f} ± {s['stddev'] / 2**20:,.0f} MiB"
    if METRICS[metric].unit == "%":
        return (
            f"{s['median']:.0f}% ⚠ > bound"
            if metric == "decode_bandwidth_pct" and s["median"] > 100
            else f"{s['median']:.0f}%"
        )
    return f"{s['mean']:,.1f} ± {s['stddev']:,.1f}"


def warnings_of(metrics: dict[str, dict]) -> list[str]:
    """siliconbench.contract.aggregate's stability rule applied to the SQL summaries."""
    return stability_warnings({m: Summary(**s) for m, s in metrics.items()})


def compare_table(rows: list[dict]) -> pd.DataFrame:
    """engine | prompt tok/s | generation tok/s | memory peak (mean ± stddev), one row per series."""
    out = []
    for r in rows:
        m = r["metrics"]
        out.append(
            {
                "configuration": r["config"],
                "engine": r["series"],
                **{label: _pm(m.get(metric), metric) for metric, label in PUBLISHED.items()},
                "samples": (m.get("prefill_tps") or {}).get("count", 0),
                "results": r["n_results"],
                # the roofline share moves with decode_tps: judged once, there
                "stability": "; ".join(warnings_of({k: v for k, v in m.items() if k != "decode_bandwidth_pct"}))
                or "ok",
                "identity": r["identity_hash"],
                "detail": f"/result?job={r['job_id']}",
            }
        )
    return pd.DataFrame(out)


def series_weights(r: dict) -> str:
    """A series' normalised weight dtype (siliconbench.contract.manifest.weights_of): its recorded dtypes where the row
    carries them (``dtypes``, or ``environment.dtypes``), else its quant."""
    dtypes = r.get("dtypes") or (r.get("environment") or {}).get("dtypes")
    return weights_of(r.get("quant"), dtypes if isinstance(dtypes, dict) else None)


def ratio_table(rows: list[dict]) -> pd.DataFrame:
    """llama.cpp ÷ MLX mean ratios per configuration measured on both (every pair when versions differ).

    ``weights`` names the pair's weight dtype, or marks a pair whose dtypes differ (``⚠ f16 ≠ f32``: GGUF F16
    against MLX f32), and ``same dtype`` says which rows compare the engines alone; a mixed row's ratios
    also carry the dtype difference."""
    by_config: dict[str, dict[str, list[dict]]] = {}
    for r in rows:
        by_config.setdefault(r["config"], {}).setdefault(r["engine"], []).append(r)
    out = []
    for config, engines in by_config.items():
        for a in engines.get("llama.cpp", []):
            for b in engines.get("mlx", []):

                def ratio(metric):
                    x, y = a["metrics"].get(metric), b["metrics"].get(metric)
                    return round(x["mean"] / y["mean"], 3) if x and y and y["mean"] else None

                wa, wb = series_weights(a), series_weights(b)
                out.append(
                    {
                        "configuration": config,
                        "llama.cpp": a["series"],
                        "mlx": b["series"],
                        "weights": wa if wa == wb else f"⚠ {wa} ≠ {wb} (mixed dtypes)",
                        "same dtype": wa == wb,
                        **{f"{PUBLISHED[m]} ×": ratio(m) for m in PUBLISHED},
                    }
                )
    return pd.DataFrame(out)


def chart_frame(rows: list[dict], metric: str, x: str = "n_prompt") -> pd.DataFrame:
    """Long form for the charts: one row per series with mean and mean ± stddev (lines along ``x``)."""
    out = []
    for r in with_lines([dict(r) for r in rows], x):
        s = r["metrics"].get(metric)
        if s:
            out.append(
                {
                    "config": r["config"],
                    "series": r["series"],
                    "line": r["line"],
                    "engine": r["engine"],
                    "identity": r["identity_hash"],
                    "n_prompt": r["n_prompt"],
                    "n_depth": r["n_depth"],
                    # whiskers at mean ± stddev, clipped at 0: no metric here can be negative
                    "mean": s["mean"],
                    "lo": max(s["mean"] - s["stddev"], 0.0),
                    "hi": s["mean"] + s["stddev"],
                    "stddev": s["stddev"],
                    "n": s["count"],
                }
            )
    return pd.DataFrame(out)


def sample_frame(rows: list[dict], samples: list[dict]) -> pd.DataFrame:
    """Raw samples joined to their series' labels (for the distribution plot)."""
    labels = {r["identity_hash"]: r for r in rows}
    out = []
    for s in samples:
        r = labels.get(s["identity_hash"])
        if r is not None:
            out.append(
                {
                    "config": r["config"],
                    "series": r["series"],
                    "engine": r["engine"],
                    "value": s["value"],
                    "repetition": s["repetition"],
                    "job_id": s["job_id"],
                }
            )
    return pd.DataFrame(out)
