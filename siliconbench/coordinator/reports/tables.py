"""Tables shaped like the comparisons people publish: engine | prompt t/s | generation t/s | memory peak."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from siliconbench.contract.aggregate import summarize
from siliconbench.contract.manifest import weights_of
from siliconbench.contract.metrics import HEADLINE

from siliconbench.coordinator.reports.export import load_records, summary_dict
from siliconbench.coordinator.reports.quant_matrix import matrix_rows, matrix_table
from siliconbench.coordinator.reports.workload_tables import TABLES, workload_table
from siliconbench.storage import sweep_store
from siliconbench.storage.database import session_scope

CONFIG_KEYS = ("sweep_id", "engine", "engine_version", "model", "quant", "n_prompt", "n_gen", "n_depth")


def _pm(summary: dict | None, fmt: str = "{:,.1f}") -> str:
    if not summary:
        return "—"
    return f"{fmt.format(summary['mean'])} ± {fmt.format(summary['stddev'])}"


def _mib(n: int | None) -> str:
    return f"{n / 2**20:,.0f} MiB" if n else "—"


def version_cell(r: dict) -> str:
    """The engine version as a reader names it; a llama.cpp build with the commit it is (b7123 @ abcdef0)."""
    version = r.get("engine_version") or "—"
    built = ((r.get("environment") or {}).get("engine_build") or {}).get("measured_by")
    return f"{version} @ {r['commit'][:7]}" if built and r.get("commit") and r["commit"][:7] not in version else version


def records_for(url: str, sweep_id: str | None) -> list[dict]:
    with session_scope(url) as s:
        sweep_id = sweep_id or sweep_store.latest_sweep_id(s)
        if sweep_id is None:
            return []
        return load_records(s, sweep_id=sweep_id)


def host_of(r: dict) -> str:
    return r.get("worker") or r["host"]["hostname"] or ""


def by_configuration(records: list[dict]) -> list[dict]:
    """The processes of one configuration (host, engine version, lengths) as one record: their measured
    repetitions pooled for mean ± stddev, ``processes`` counted; a failed process is its own row."""
    groups: dict[tuple, list[dict]] = {}
    for i, r in enumerate(records):
        key = (host_of(r), *(str(r.get(k)) for k in CONFIG_KEYS)) if r["status"] == "ok" else ("failed", i)
        groups.setdefault(key, []).append(r)
    out = []
    for group in groups.values():
        first = {**group[0], "processes": len(group)}
        if len(group) > 1:
            for m in HEADLINE:
                first[m] = summary_dict(summarize([v for r in group for v in (r.get(m) or {}).get("samples", [])]))
            first["peak_memory_bytes"] = max(
                (r["peak_memory_bytes"] for r in group if r["peak_memory_bytes"]), default=None
            )
            loads = [r["load_s"] for r in group if r["load_s"] is not None]
            first["load_s"] = summarize(loads).median if loads else None
            first["unstable"] = [w for r in group for w in r["unstable"]]
        out.append(first)
    return out


def results_table(records: list[dict], title: str = "") -> Table:
    """One row per configuration (its processes pooled, see ``by_configuration``)."""
    records = by_configuration(records)
    t = Table(title=title, title_justify="left")
    many_hosts = len({host_of(r) for r in records}) > 1
    versions = any(r.get("engine_version") for r in records) and len({r.get("engine_version") for r in records}) > 1
    many_procs = any(r["processes"] > 1 for r in records)
    device = any(_device_peak(r) for r in records)  # a CUDA host: the GPU's own memory beside the host's
    if many_hosts:
        t.add_column("host")
    t.add_column("engine")
    if versions:
        t.add_column("version")
    if many_procs:
        t.add_column("procs", justify="right")
    for col, just in [
        ("model", "left"),
        ("quant", "left"),
        ("prompt", "right"),
        ("gen", "right"),
        ("depth", "right"),
        ("prefill tok/s", "right"),
        ("decode tok/s", "right"),
        ("% bw", "right"),
        ("TTFT ms", "right"),
        ("peak mem", "right"),
        *([("device mem", "right"), ("J/token", "right")] if device else []),
        ("load s", "right"),
        ("", "left"),
    ]:
        t.add_column(col, justify=just)
    for r in records:
        lead = (
            ([host_of(r)] if many_hosts else [])
            + [r["engine"]]
            + ([version_cell(r)] if versions else [])
            + ([str(r["processes"])] if many_procs else [])
        )
        if r["status"] != "ok":
            t.add_row(
                *lead,
                r["model"],
                r["quant"],
                str(r["n_prompt"]),
                str(r["n_gen"]),
                str(r["n_depth"]),
                "[red]failed[/]",
                "",
                "",
                "",
                "",
                *([""] * (2 if device else 0)),
                "",
                (r["error"] or "")[:60],
            )
            continue
        warn = " ".join(
            w
            for w in (
                "[yellow]⚠ unstable[/]" if r["unstable"] else "",
                "[red]🌡 throttled[/]" if _throttled(r) else "",
                "[red]⚠ contended[/]" if _contended(r) else "",
            )
            if w
        )
        t.add_row(
            *lead,
            r["model"],
            r["quant"],
            str(r["n_prompt"]),
            str(r["n_gen"]),
            str(r["n_depth"]),
            _pm(r["prefill_tps"]),
            _pm(r["decode_tps"]),
            _pct(r),
            _pm(r["ttft_ms"]),
            _mib(r["peak_memory_bytes"]),
            *([_mib(_device_peak(r)), _joules(r)] if device else []),
            f"{r['load_s']:.3f}" if r["load_s"] is not None else "—",
            warn,
        )
    return t


def _pct(r: dict) -> str:
    """Median decode_bandwidth_pct: decode as a share of the host's memory-bandwidth bound (siliconbench/worker/measure/roofline.py)."""
    s = (r.get("metrics") or {}).get("decode_bandwidth_pct")
    if not s:
        return "—"
    if s["median"] > 100 or ((r.get("extra") or {}).get("roofline") or {}).get("exceeded"):
        return f"[yellow]{s['median']:.0f}% ⚠ > bound[/]"  # the weights fit a cache, or the probe is wrong
    return f"{s['median']:.0f}%"


def _device_peak(r: dict) -> int | None:
    """The job's peak GPU memory on a CUDA host (siliconbench/worker/platform/nvidia.py), None elsewhere."""
    return ((r.get("extra") or {}).get("device_memory") or {}).get("peak_device_memory_bytes")


def _joules(r: dict) -> str:
    """Decode joules per token (mean), where the decode region was long enough to read the GPU's counter."""
    s = (r.get("metrics") or {}).get("decode_j_per_token")
    return f"{s['mean']:.3f}" if s else "—"


def _throttled(r: dict) -> bool:
    return bool(((r.get("extra") or {}).get("thermal") or {}).get("throttled"))


def _contended(r: dict) -> bool:
    """Other processes took real CPU while the job ran (siliconbench/worker/measure/busy.py)."""
    return bool(((r.get("extra") or {}).get("busy") or {}).get("contended"))


def record_weights(r: dict) -> str:
    """A record's normalised weight dtype (siliconbench.contract.manifest.weights_of): its environment.dtypes where the
    engine recorded them, else its quant."""
    return weights_of(r.get("quant"), ((r.get("environment") or {}).get("dtypes")))


def ratio_table(records: list[dict]) -> Table | None:
    """llama.cpp / MLX mean ratios for configurations measured on both engines (same host, same lengths);
    one row per pair of engine versions where a sweep ran several.

    The ``weights`` column names the pair's weight dtype (f16, f32, q4 ...). A pair whose weight dtypes differ
    (GGUF F16 against MLX f32, as level full paired before both dtypes existed) is marked in red, ``⚠ f16 ≠
    f32``: its ratio mixes the engines with the bytes each reads per token, and the caption says so."""
    cells: dict[tuple, dict[str, list[dict]]] = {}
    for r in by_configuration(records):
        if r["status"] == "ok":
            key = (host_of(r), r["model"], r["quant_level"], r["n_prompt"], r["n_gen"], r["n_depth"])
            cells.setdefault(key, {}).setdefault(r["engine"], []).append(r)
    pairs = [(k, a, b) for k, v in cells.items() for a in v.get("llama.cpp", []) for b in v.get("mlx", [])]
    if not pairs:
        return None
    versions = any(len(v.get(e, [])) > 1 for v in cells.values() for e in ("llama.cpp", "mlx"))
    t = Table(
        title="llama.cpp ÷ MLX, ratio of means (tok/s: >1 = llama.cpp faster; TTFT and memory: <1 = llama.cpp lower)",
        title_justify="left",
    )
    left = ("host", "model", "level", "paired", "weights", "versions")
    for col in (
        "host",
        "model",
        "level",
        "paired",
        "weights",
        *(("versions",) if versions else ()),
        "prompt",
        "gen",
        "depth",
        "prefill",
        "decode",
        "TTFT",
        "peak mem",
    ):
        t.add_column(col, justify="right" if col not in left else "left")
    mixed = 0
    for (host, model, level, p, g, d), a, b in pairs:
        wa, wb = record_weights(a), record_weights(b)
        if wa == wb:
            weights = wa
        else:
            mixed += 1
            weights = f"[bold red]⚠ {wa} ≠ {wb}[/]"

        def ratio(m):
            return f"{a[m]['mean'] / b[m]['mean']:.2f}×" if a.get(m) and b.get(m) else "—"

        mem = (
            f"{a['peak_memory_bytes'] / b['peak_memory_bytes']:.2f}×"
            if a["peak_memory_bytes"] and b["peak_memory_bytes"]
            else "—"
        )
        label = (f"{a.get('engine_version') or '—'} ÷ {b.get('engine_version') or '—'}",) if versions else ()
        cells = [ratio("prefill_tps"), ratio("decode_tps"), ratio("ttft_ms"), mem]
        if wa != wb:
            cells = [f"[red]{c}[/]" if c != "—" else c for c in cells]
        t.add_row(
            host, model, str(level), f"{a['quant']} ÷ {b['quant']}", weights, *label, str(p), str(g), str(d), *cells
        )
    if mixed:
        t.caption = (
            f"[bold red]⚠[/] {mixed} row(s) pair different weight dtypes: their ratios mix the engines "
            "with the bytes each reads per token. For a matched pair, give the model a form of the other "
            "engine in the same dtype (`siliconbench models add NAME SOURCE --to-existing`, or `models quantize`), "
            "or name exact quants of one dtype (the project's own tiny model: `models make-tiny --force`)."
        )
        t.caption_justify = "left"
    return t


def print_sweep_table(url: str, sweep_id: str | None, console: Console | None = None) -> list[dict]:
    console = console or Console()
    records = records_for(url, sweep_id)
    if not records:
        console.print("No results yet.")
        return records
    generate = [r for r in records if r["workload"] == "generate"]
    if generate:
        procs = max(r["process"] for r in generate) + 1
        console.print(
            results_table(
                generate,
                title=f"sweep {generate[0]['sweep_id']} — mean ± stddev over "
                f"{generate[0]['repetitions']} repetitions" + (f" × {procs} processes" if procs > 1 else ""),
            )
        )
        ratios = ratio_table(generate)
        if ratios is not None:
            console.print(ratios)
    for kind in TABLES:  # one table per other workload kind, in a fixed order
        mine = [r for r in records if r["workload"] == kind]
        if mine:
            console.print(workload_table(kind, mine))
    if any((r.get("extra") or {}).get("kld") for r in records):
        for model, rows in matrix_rows(records).items():
            console.print(matrix_table(model, rows))
    unstable = [r for r in records if r["unstable"]]
    for r in unstable:
        what = (
            ""
            if r["workload"] == "generate"
            else " "
            + " ".join(
                [r["workload"]]
                + [
                    f"{k}={v}"
                    for k, v in r["params"].items()
                    if k in ("clients", "depth", "processes", "cache", "mmap")
                ]
            )
        )
        console.print(f"[yellow]⚠[/] {r['engine']} {r['model']} {r['quant']}{what}: " + "; ".join(r["unstable"]))
    return records
