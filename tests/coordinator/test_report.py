"""The run's tables: a configuration's processes are one row, engine versions get their own rows."""

from __future__ import annotations

from rich.console import Console

from siliconbench.contract.aggregate import summarize

from siliconbench.coordinator.reports.tables import by_configuration, ratio_table, results_table


def record(engine: str, version: str | None, process: int, decode: list[float], peak: int = 100 << 20) -> dict:
    s = summarize(decode)
    summary = {
        "mean": s.mean,
        "median": s.median,
        "stddev": s.stddev,
        "min": s.min,
        "max": s.max,
        "samples": list(decode),
    }
    return {
        "status": "ok",
        "worker": "mini-1",
        "host": {"hostname": "mini-1"},
        "sweep_id": "s",
        "engine": engine,
        "engine_version": version,
        "process": process,
        "model": "tiny",
        "quant": "F16",
        "quant_level": "full",
        "n_prompt": 64,
        "n_gen": 16,
        "n_depth": 0,
        "repetitions": len(decode),
        "prefill_tps": None,
        "decode_tps": summary,
        "ttft_ms": None,
        "peak_memory_bytes": peak,
        "load_s": 0.1 + process / 100,
        "unstable": [],
        "error": None,
    }


RECORDS = [
    r
    for p in range(3)
    for r in (
        record("llama.cpp", None, p, [200.0 + p, 202.0]),
        record("mlx", "0.31.3", p, [100.0, 102.0 + p], peak=(120 + p) << 20),
        record("mlx", "0.32.2", p, [80.0, 82.0]),
    )
]


def test_processes_of_a_configuration_pool_into_one_row():
    rows = by_configuration(RECORDS)
    assert [(r["engine"], r["engine_version"], r["processes"]) for r in rows] == [
        ("llama.cpp", None, 3),
        ("mlx", "0.31.3", 3),
        ("mlx", "0.32.2", 3),
    ]
    mlx = rows[1]
    assert mlx["decode_tps"]["samples"] == [100.0, 102.0, 100.0, 103.0, 100.0, 104.0]  # every repetition kept
    assert mlx["decode_tps"]["mean"] == summarize(mlx["decode_tps"]["samples"]).mean
    assert mlx["peak_memory_bytes"] == 122 << 20 and mlx["load_s"] == summarize([0.1, 0.11, 0.12]).median
    assert by_configuration(RECORDS[:1])[0]["decode_tps"] == RECORDS[0]["decode_tps"]  # one process: as stored


def test_tables_show_versions_and_process_counts():
    console = Console(width=250, record=True)
    console.print(results_table(RECORDS))
    console.print(ratio_table(RECORDS))
    text = console.export_text()
    assert "procs" in text and "0.31.3" in text and "0.32.2" in text
    assert "— ÷ 0.31.3" in text and "— ÷ 0.32.2" in text  # llama.cpp against each MLX version
    llama, mlx = (
        summarize([v for r in RECORDS if r["engine_version"] == ver for v in r["decode_tps"]["samples"]])
        for ver in (None, "0.31.3")
    )
    assert f"{llama.mean / mlx.mean:.2f}×" in text  # ratio of the pooled means


def like_for_like(quants: dict[str, str], dtypes: dict[str, dict] | None = None) -> list[dict]:
    out = []
    for engine, quant in quants.items():
        r = record(engine, None, 0, [200.0, 202.0] if engine == "llama.cpp" else [100.0, 102.0])
        r["quant"] = quant
        if dtypes:
            r["environment"] = {"dtypes": dtypes[engine]}
        out.append(r)
    return out


def ratio_text(records: list[dict]) -> str:
    console = Console(width=250, record=True)
    console.print(ratio_table(records))
    return console.export_text()


def test_ratio_table_marks_a_pair_of_different_weight_dtypes():
    mixed = ratio_text(like_for_like({"llama.cpp": "F16", "mlx": "f32"}))
    assert "⚠ f16 ≠ f32" in mixed and "pair different weight dtypes" in mixed
    assert "1.99×" in mixed  # still shown, marked: the row says what the ratio mixes
    for pair, name in (
        ({"llama.cpp": "F16", "mlx": "f16"}, "f16"),
        ({"llama.cpp": "F32", "mlx": "f32"}, "f32"),
        ({"llama.cpp": "Q4_K_M", "mlx": "4bit"}, "q4"),
        ({"llama.cpp": "Q8_0", "mlx": "8bit"}, "q8"),
    ):
        text = ratio_text(like_for_like(pair))
        assert "⚠" not in text and "different weight dtypes" not in text, pair
        assert f" {name} " in text


def test_ratio_table_prefers_the_dtypes_the_engines_recorded():
    # quant says F16 for both (an old-style record), the engines say what they actually loaded
    recorded = {
        "llama.cpp": {"weights": "all F32", "activations": "f32", "kv_cache": "f16"},
        "mlx": {"weights": "f16", "activations": "f16", "kv_cache": "f16"},
    }
    assert "⚠ f32 ≠ f16" in ratio_text(like_for_like({"llama.cpp": "F16", "mlx": "F16"}, recorded))
    recorded["mlx"] = {"weights": "f32", "activations": "f32", "kv_cache": "f32"}
    assert "⚠" not in ratio_text(like_for_like({"llama.cpp": "F16", "mlx": "f16"}, recorded))
