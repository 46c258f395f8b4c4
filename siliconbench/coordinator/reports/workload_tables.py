"""One table per workload kind beyond generate, from export records (every figure read from ``metrics``).

The long-context and perplexity tables have the shape of the reference comparison's ("32K prefill |
KV cache memory", "Format | Perplexity | File size"); the others show the operational tail.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.table import Table

from siliconbench.contract.aggregate import TAIL_SAMPLES, tail_certified
from siliconbench.contract.manifest import QUANT_LEVELS

Cell = Callable[[dict], str]


def _m(r: dict, name: str) -> dict | None:
    return (r.get("metrics") or {}).get(name)


def pm(name: str, fmt: str = "{:,.1f}", scale: float = 1.0) -> Cell:
    """mean ± stddev of a metric."""

    def cell(r: dict) -> str:
        s = _m(r, name)
        return f"{fmt.format(s['mean'] * scale)} ± {fmt.format(s['stddev'] * scale)}" if s else "—"

    return cell


def pct(name: str, fmt: str = "{:,.0f}") -> Cell:
    """p50 / p90 / p99 of a metric; a tail too few samples back (MLPerf's early-stopping bound) in parentheses."""

    def cell(r: dict) -> str:
        s = _m(r, name)
        if not s:
            return "—"
        parts = [fmt.format(s["median"])]
        for q in (90, 99):
            text = fmt.format(s[f"p{q}"])
            parts.append(text if tail_certified(q, s["count"]) else f"({text})")
        return " / ".join(parts)

    return cell


def stat(name: str, key: str, fmt: str = "{:,.0f}") -> Cell:
    def cell(r: dict) -> str:
        s = _m(r, name)
        return fmt.format(s[key]) if s else "—"

    return cell


def mib(name: str, key: str = "max") -> Cell:
    def cell(r: dict) -> str:
        s = _m(r, name)
        return f"{s[key] / 2**20:,.1f} MiB" if s and s[key] else "—"

    return cell


def field(path: str, fmt: str = "{}") -> Cell:
    def cell(r: dict) -> str:
        where, _, key = path.partition(".")
        v = (r.get(where) or {}).get(key) if key else r.get(where)
        return fmt.format(v) if v is not None else "—"

    return cell


def backend(r: dict) -> str:
    return f"{r['engine']} {r['quant']}"


def cache_state(r: dict) -> str:
    s = _m(r, "page_cache_resident_fraction")
    asked = r["params"].get("cache", "?")
    return f"{asked} ({s['mean']:.0%} cached)" if s else asked


def streams_at_once(r: dict) -> str:
    """Concurrent: the most streams that overlapped in a burst, and the server's batch limit ("3 (batch ≤ 32)").

    Records from before this was recorded show "—"."""
    extra = r.get("extra") or {}
    seen, batch = extra.get("observed") or {}, extra.get("batching") or {}
    if "max_streams_in_flight" not in seen:
        return "—"
    limit = (
        "one at a time"
        if batch.get("batches") is False
        else (f"batch ≤ {batch['decode_concurrency']}" if batch.get("decode_concurrency") else "batches")
    )
    return f"{seen['max_streams_in_flight']} ({limit})"


def served_by(r: dict) -> str:
    """The server, with llama-server's slots ("llama-server ×4"), or a batching server's batch ("mlx_lm.server ≤8")."""
    extra = r.get("extra") or {}
    server, slots = extra.get("server") or "—", (r.get("params") or {}).get("slots")
    if slots and server == "llama-server":
        return f"{server} ×{slots}"
    batch = extra.get("batching") or {}
    return f"{server} ≤{batch['max_batch']}" if batch.get("batches") and batch.get("max_batch") else server


def rate_cell(r: dict) -> str:
    """Asked rate and the rate the client achieved ("4 → 3.98", conversations with multi_turn: "1 → 0.98 conv"), the
    client's concurrency limit ("≤4"), and a flag where the client fell behind its schedule; 'inf' sends all at once."""
    params, extra = r.get("params") or {}, r.get("extra") or {}
    asked, limit = params.get("request_rate"), params.get("max_concurrency")
    sent = _m(r, "serve_sent_rate")
    unit = " conv" if params.get("multi_turn") else ""
    if asked == "inf" or asked is None:
        text = f"closed loop ≤{limit}" if limit else "all at once"
    else:
        text = (f"{asked:g} → {sent['mean']:.2f}" if sent else f"{asked:g}") + unit
        text += f" ≤{limit}" if limit else ""
    return text + (" [yellow](client behind)[/]" if extra.get("client_behind") else "")


def reuse_cell(r: dict) -> str:
    """The prompt cache's share of the prompt tokens, marked where the runs resent prompts of a short file."""
    s = _m(r, "serve_prompt_reuse_pct")
    repeated = ((r.get("extra") or {}).get("prompts") or {}).get("repeated")
    text = f"{s['mean']:.0f} %" if s else "—"
    return text + (" (prompts repeated)" if repeated else "")


def goodput_cell(r: dict) -> str:
    slo = (r.get("params") or {}).get("slo")
    s = _m(r, "serve_request_goodput")
    if not slo or not s:
        return "—"
    return f"{s['mean']:.2f} ({', '.join(f'{k[:-3].upper()} ≤ {v:g} ms' for k, v in slo.items())})"


def _failures(r: dict, count: int) -> list[str]:
    return ["[red]failed[/]", (r.get("error") or "")[:70]] + [""] * (count - 2)


KEY = [("engine", "left", backend), ("model", "left", field("model"))]

TABLES: dict[str, tuple[str, list[tuple[str, str, Cell]]]] = {
    "swap": (
        "model swap: unload A → load B → first token of B (mean ± stddev)",
        KEY
        + [
            (
                "to",
                "left",
                lambda r: (
                    f"{r['params'].get('to_quant')}"
                    + (f" of {r['params']['to_model']}" if r["params"].get("to_model") != r["model"] else "")
                ),
            ),
            ("cache", "left", cache_state),
            ("mmap", "left", lambda r: {True: "on", False: "off", None: "—"}[r["params"].get("mmap")]),
            ("unload ms", "right", pm("swap_unload_s", scale=1000)),
            ("load B ms", "right", pm("swap_load_s", scale=1000)),
            ("first token ms", "right", pm("swap_first_token_ms")),
            ("total ms", "right", pm("swap_total_s", scale=1000)),
            ("RSS after unload", "right", mib("swap_rss_after_unload_bytes", "mean")),
        ],
    ),
    "restart": (
        "server restart: process start → ready → first streamed token (p50 / p90 / p99)",
        KEY
        + [
            ("quant", "left", field("quant")),
            ("server", "left", field("extra.server")),
            ("ready s", "right", pct("restart_ready_s", "{:.2f}")),
            ("first token s", "right", pct("restart_first_token_s", "{:.2f}")),
            ("warm TTFT ms", "right", pct("restart_warm_ttft_ms")),
            ("stop s", "right", pct("restart_stop_s", "{:.2f}")),
            (
                "failed / sent during restarts",
                "right",
                lambda r: f"{stat('restart_failed_requests', 'total')(r)} / {stat('restart_requests', 'total')(r)}",
            ),
            ("unclean stops", "right", field("extra.unclean_stops")),
        ],
    ),
    "concurrent": (
        "concurrent streaming clients (latencies p50 / p90 / p99)",
        KEY
        + [
            ("quant", "left", field("quant")),
            ("server", "left", field("extra.server")),
            ("clients", "right", field("params.clients")),
            ("streams at once", "right", streams_at_once),
            ("aggregate tok/s", "right", pm("aggregate_output_tps")),
            ("TTFT ms", "right", pct("request_ttft_ms")),
            ("ITL ms", "right", pct("request_itl_ms", "{:,.1f}")),
            ("e2e ms", "right", pct("request_e2e_ms")),
            ("errors", "right", stat("request_errors", "total")),
            ("server peak mem", "right", mib("server_peak_rss_bytes")),
            ("kernel peak (VmHWM)", "right", mib("server_hwm_rss_bytes")),
        ],
    ),
    "serve": (
        "serving at request rates, vLLM's metrics (latencies p50 / p90 / p99 over every request of the runs; a tail in "
        f"(parentheses) has fewer samples than certify it: {TAIL_SAMPLES[90]} for p90, {TAIL_SAMPLES[99]} for p99)",
        KEY
        + [
            ("quant", "left", field("quant")),
            ("server", "left", served_by),
            ("rate asked → sent", "right", rate_cell),
            ("req/s", "right", pm("serve_request_throughput", "{:,.2f}")),
            ("output tok/s", "right", pm("serve_output_throughput")),
            ("TTFT ms", "right", pct("serve_ttft_ms")),
            ("TPOT ms", "right", pct("serve_tpot_ms", "{:,.1f}")),
            ("ITL ms", "right", pct("serve_itl_ms", "{:,.1f}")),
            ("E2EL ms", "right", pct("serve_e2el_ms")),
            ("goodput req/s", "right", goodput_cell),
            ("failed", "right", stat("serve_failed_requests", "total")),
            ("prompt reused", "right", reuse_cell),
            ("server peak mem", "right", mib("server_peak_rss_bytes")),
        ],
    ),
    "long_context": (
        "long context: full prompt prefill at depth, and KV-cache memory",
        KEY
        + [
            ("depth", "right", field("params.depth")),
            ("prefill tok/s", "right", pm("prefill_tps")),
            ("decode tok/s", "right", pm("decode_tps")),
            (
                "KV cache memory",
                "right",
                lambda r: (
                    mib("kv_cache_bytes", "mean")(r)
                    + (
                        f" ({'F' if r['engine'] == 'llama.cpp' else 'FP'}{int(8 * r['extra']['kv_dtype_bytes'])} KV)"
                        if (r.get("extra") or {}).get("kv_dtype_bytes")
                        else ""
                    )
                ),
            ),
            ("KV from shape", "right", mib("kv_cache_computed_bytes", "mean")),
        ],
    ),
    "perplexity": (
        "perplexity on the shipped corpus, by format",
        [
            ("model", "left", field("model")),
            ("Format", "left", field("extra.format")),
            # Records from before modes existed have no params.mode: they scored all tokens.
            ("mode", "left", lambda r: (r.get("params") or {}).get("mode") or "all-tokens"),
            ("Perplexity", "right", stat("perplexity", "mean", "{:,.3f}")),
            (
                "File size",
                "right",
                lambda r: f"{_m(r, 'file_size_bytes')['mean'] / 1e6:,.1f} MB" if _m(r, "file_size_bytes") else "—",
            ),
            ("KLD", "right", stat("kld_mean", "mean", "{:.5f}")),
            ("same top", "right", stat("same_top_pct", "mean", "{:.2f} %")),
            ("tokens scored", "right", field("extra.scored_tokens")),
        ],
    ),
    "multiprocess": (
        "several engine processes decoding at once",
        KEY
        + [
            ("processes", "right", field("params.processes")),
            ("aggregate decode tok/s", "right", pm("mp_aggregate_decode_tps")),
            ("per-process decode tok/s", "right", pm("mp_process_decode_tps")),
            ("total RSS", "right", mib("mp_total_rss_bytes")),
            ("total PSS", "right", mib("mp_total_pss_bytes")),
        ],
    ),
}

# The perplexity table lists formats in the reference's order: full precision, then 8-bit ... 2-bit.
LEVEL_ORDER = {level: i for i, level in enumerate(QUANT_LEVELS)}


def workload_table(kind: str, records: list[dict]) -> Table:
    title, columns = TABLES[kind]
    t = Table(title=title, title_justify="left")
    for name, just, _ in columns:
        t.add_column(name, justify=just)
    if kind == "perplexity":
        records = sorted(
            records,
            key=lambda r: (
                r["model"],
                (r.get("params") or {}).get("mode") or "all-tokens",
                LEVEL_ORDER.get(r["quant_level"], 9),
                r["engine"],
            ),
        )
    n_key = 2 if kind != "perplexity" else 1
    for r in records:
        if r["status"] != "ok":
            t.add_row(*[c(r) for _, _, c in columns[:n_key]], *_failures(r, len(columns) - n_key))
            continue
        t.add_row(*[c(r) for _, _, c in columns])
    return t
