"""`siliconbench run` of every workload kind end to end: one table per kind, and the JSON export carries each
workload's metrics with their raw samples."""

from __future__ import annotations

import json

import yaml

from siliconbench.coordinator.reports.workload_tables import TABLES
from tests.cli_support import sb
from tests.conftest import SMALL

SWEEP = {
    "name": "every-kind",
    "models": [SMALL],
    "engines": ["llama.cpp", "mlx"],
    "quantizations": ["full"],
    "repetitions": 1,
    "warmup": 0,
    "seed": 0,
    "workloads": [
        {"kind": "generate", "prompt_tokens": [32], "gen_tokens": [8], "depth": [0]},
        {"kind": "swap", "to_quant": "q4", "cache": ["cold"], "mmap": [True], "prompt_tokens": 16},
        {"kind": "restart", "prompt_tokens": 16, "gen_tokens": 4, "client_interval_ms": None},
        {"kind": "concurrent", "clients": [2], "prompt_tokens": 16, "gen_tokens": 4},
        {"kind": "serve", "request_rate": [8], "num_requests": 3, "prompt_tokens": 16, "max_tokens": 4},
        {"kind": "long_context", "depths": [128], "gen_tokens": 4},
        {"kind": "perplexity", "window_tokens": 64, "windows": 2},
        {"kind": "multiprocess", "processes": [2], "prompt_tokens": 8, "gen_tokens": 8},
    ],
}
OWN = {
    "swap": "swap_total_s",
    "restart": "restart_first_token_s",
    "concurrent": "request_ttft_ms",
    "serve": "serve_ttft_ms",
    "long_context": "kv_cache_bytes",
    "perplexity": "perplexity",
    "multiprocess": "mp_aggregate_decode_tps",
    "generate": "decode_tps",
}


def test_run_prints_a_table_per_kind_and_exports_every_metric(tmp_path, isolated_env):
    path = tmp_path / "every-kind.yaml"
    path.write_text(yaml.safe_dump(SWEEP))
    run = sb("run", str(path))
    assert run.returncode == 0, run.stderr + run.stdout
    for title, _ in TABLES.values():
        assert title[:30] in run.stdout.replace("\n", " "), title
    assert "prefill tok/s" in run.stdout  # the generate table is still there
    out = sb("results", "--format", "json")
    assert out.returncode == 0, out.stderr
    records = json.loads(out.stdout)
    assert sorted({r["workload"] for r in records}) == sorted(OWN)
    for r in records:
        assert r["status"] == "ok", (r["workload"], r["engine"], r["error"])
        metric = r["metrics"][OWN[r["workload"]]]
        assert metric["samples"] and metric["count"] == len(metric["samples"])
        assert {"mean", "median", "p90", "p99", "min", "max", "stddev"} <= set(metric)
        assert r["environment"]["packages"] and r["host"]["cores"] >= 1
        if r["workload"] != "generate":
            assert r["params"] and r["extra"]["workload"] == r["workload"]
