"""llama-bench interop: its README's JSON example, JSONL, CSV and SQL into the store, into compare and
regressions, and siliconbench's own results out in llama-bench's shape and back."""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import level_of

from siliconbench.coordinator.history.compare import Verdict, compare_db
from siliconbench.coordinator.history.load import load_points
from siliconbench.coordinator.history.regressions import find_steps
from siliconbench.coordinator.reports.llamabench import export_records, import_records, parse, quant_of
from siliconbench.storage import database
from siliconbench.storage.database import session_scope
from siliconbench.storage.result_store import load_results
from siliconbench.storage.tables import Job
from siliconbench.worker.platform.threads import performance_cores
from tests.conftest import SMALL

ROOT = Path(__file__).resolve().parents[2]

# The JSON example of llama.cpp's tools/llama-bench/README.md (build 5163, Qwen2.5-7B Q4_K_M on an RTX 4080).
COMMON = {
    "build_commit": "8cf427ff",
    "build_number": 5163,
    "cpu_info": "AMD Ryzen 7 7800X3D 8-Core Processor",
    "gpu_info": "NVIDIA GeForce RTX 4080",
    "backends": "CUDA",
    "model_filename": "models/Qwen2.5-7B-Instruct-Q4_K_M.gguf",
    "model_type": "qwen2 7B Q4_K - Medium",
    "model_size": 4677120000,
    "model_n_params": 7615616512,
    "n_batch": 2048,
    "n_ubatch": 512,
    "n_threads": 8,
    "cpu_mask": "0x0",
    "cpu_strict": False,
    "poll": 50,
    "type_k": "f16",
    "type_v": "f16",
    "n_gpu_layers": 99,
    "split_mode": "layer",
    "main_gpu": 0,
    "no_kv_offload": False,
    "flash_attn": False,
    "tensor_split": "0.00",
    "tensor_buft_overrides": "none",
    "defrag_thold": -1.0,
    "use_mmap": True,
    "embeddings": False,
    "no_op_offload": 0,
}
README_JSON = [
    {
        **COMMON,
        "n_prompt": 512,
        "n_gen": 0,
        "n_depth": 0,
        "test_time": "2025-04-24T11:58:50Z",
        "avg_ns": 72135640,
        "stddev_ns": 1453752,
        "avg_ts": 7100.002165,
        "stddev_ts": 140.341520,
        "samples_ns": [74601900, 71632900, 71745200, 71952700, 70745500],
        "samples_ts": [6863.1, 7147.55, 7136.37, 7115.79, 7237.21],
    },
    {
        **COMMON,
        "n_prompt": 0,
        "n_gen": 128,
        "n_depth": 0,
        "test_time": "2025-04-24T11:58:51Z",
        "avg_ns": 1076767880,
        "stddev_ns": 9449585,
        "avg_ts": 118.881588,
        "stddev_ts": 1.041811,
        "samples_ns": [1075361300, 1065089400, 1071761200, 1081934900, 1089692600],
        "samples_ts": [119.03, 120.178, 119.43, 118.307, 117.464],
    },
]
HOST = "rtx-box"


def later_build(records, factor: float, build: int = 5200, commit: str = "9d2f1a0b") -> list[dict]:
    out = copy.deepcopy(records)
    for r in out:
        r.update(
            build_number=build,
            build_commit=commit,
            samples_ts=[v * factor for v in r["samples_ts"]],
            test_time=r["test_time"].replace("2025-04-24", "2025-05-02"),
        )
        r["avg_ts"] *= factor
    return out


def sql_dump(records, table: str = "llama_bench") -> str:
    """What `llama-bench -o sql` prints: a CREATE TABLE of the scalar fields, one INSERT per test."""
    fields = [k for k in records[0] if not k.startswith("samples_")]
    types = {
        k: "TEXT" if isinstance(records[0][k], str) else "REAL" if isinstance(records[0][k], float) else "INTEGER"
        for k in fields
    }
    lines = (
        [f"CREATE TABLE IF NOT EXISTS {table} ("]
        + [f"  {k} {types[k]}{',' if i < len(fields) - 1 else ''}" for i, k in enumerate(fields)]
        + [");", ""]
    )
    for r in records:
        vals = ", ".join(
            f"'{r[k]}'" if isinstance(r[k], str) else str(int(r[k]) if isinstance(r[k], bool) else r[k]) for k in fields
        )
        lines.append(f"INSERT INTO {table} ({', '.join(fields)}) VALUES ({vals});")
    return "\n".join(lines) + "\n"


@pytest.fixture
def url(sqlite_url):
    return sqlite_url


def imp(url, records, sweep_id, **kw):
    with session_scope(url) as s:
        return import_records(s, records, sweep_id=sweep_id, host=kw.pop("host", HOST), source=sweep_id, **kw)


def test_parse_every_output_format():
    as_json = json.dumps(README_JSON, indent=2)
    as_jsonl = "".join(json.dumps(r) + "\n" for r in README_JSON)
    for text in (as_json, as_jsonl):
        recs = parse(text)
        assert [r["samples_ts"] for r in recs] == [r["samples_ts"] for r in README_JSON]
    for table in ("llama_bench", "test"):  # current and older llama-bench
        recs = parse(sql_dump(README_JSON, table))
        assert [(r["n_prompt"], r["n_gen"], r["build_commit"]) for r in recs] == [
            (512, 0, "8cf427ff"),
            (0, 128, "8cf427ff"),
        ]
    header = ",".join(k for k in README_JSON[0] if not k.startswith("samples_"))
    rows = [",".join(f'"{r[k]}"' for k in header.split(",")) for r in README_JSON]
    assert parse("\n".join([header, *rows]))[1]["n_gen"] == "128"
    with pytest.raises(UserError):
        parse("| model | size |")
    with pytest.raises(UserError):
        parse('[{"n_prompt": 1}]')


def test_quantization_names():
    assert quant_of("qwen2 7B Q4_K - Medium") == "Q4_K_M"
    assert quant_of("llama 7B mostly Q4_0") == "Q4_0"
    assert quant_of("llama ?B F16") == "F16"
    assert quant_of("llama 8B Q8_0") == "Q8_0"


def rerun(records, factor: float, day: int) -> list[dict]:
    """The same build measured again on another day (another llama-bench process), ``factor`` off."""
    out = copy.deepcopy(records)
    for r in out:
        r.update(samples_ts=[v * factor for v in r["samples_ts"]], test_time=f"2025-04-{day:02d}T11:58:50Z")
        r["avg_ts"] *= factor
    return out


def test_readme_json_imports_once_and_shows_up_in_compare(url):
    out = imp(url, README_JSON, "lb-5163")
    assert out["imported"] == 2 and out["raw_samples"] == 2 and out["skipped"] == []
    with pytest.raises(UserError) as err:
        imp(url, README_JSON, "lb-5163")
    assert "imported before" in err.value.message
    imp(url, later_build(README_JSON, 0.9), "lb-5200")
    # One llama-bench process a side: its repetitions are not independent samples, so no verdict yet.
    rows = compare_db(url, "build=5163", "build=5200", metrics=("prefill_tps", "decode_tps"))
    assert {r.series for r in rows} == {
        f"llama.cpp Qwen2.5-7B-Instruct-Q4_K_M Q4_K_M pp512 on {HOST}",
        f"llama.cpp Qwen2.5-7B-Instruct-Q4_K_M Q4_K_M tg128 on {HOST}",
    }
    for r in rows:
        assert r.comparison.verdict == Verdict.inconclusive and r.comparison.ratio == pytest.approx(0.9)
        assert "1 vs 1 processes cannot reach" in " ".join(r.notes)
    # Each build run on four days: four processes a side, and the 10% drop is a regression.
    for i, f in enumerate((1.004, 0.997, 1.002)):
        imp(url, rerun(README_JSON, f, 25 + i), f"lb-5163-{i}")
        imp(url, later_build(README_JSON, 0.9 * f), f"lb-5200-{i}")
    rows = compare_db(url, "build=5163", "build=5200", metrics=("prefill_tps", "decode_tps"))
    for r in rows:
        assert r.comparison.verdict == Verdict.regression and r.comparison.ratio == pytest.approx(0.9, abs=0.005)
        assert r.n_results == (4, 4) and "llama.cpp 8cf427ff" in r.baseline and "llama.cpp 9d2f1a0b" in r.candidate
    by_commit = compare_db(url, "llama.cpp=8cf427ff", "version=b5200")
    assert len(by_commit) == 2
    with session_scope(url) as s:
        steps = find_steps(load_points(s), metrics=("prefill_tps", "decode_tps"))
    assert len(steps) == 2 and all(st.changes["build"] == ["5163", "5200"] for st in steps)


def test_sql_imports_without_raw_samples_and_compare_says_so(url):
    imp(url, parse(sql_dump(README_JSON)), "sql-5163")
    imp(url, later_build(README_JSON, 0.9), "json-5200")
    rows = compare_db(url, "build=5163", "build=5200", metrics=("decode_tps",))
    assert rows[0].comparison.verdict == Verdict.inconclusive
    assert "baseline has no raw samples" in rows[0].notes[0]
    with session_scope(url) as s:
        pts = [p for p in load_points(s) if p.sweep_id == "sql-5163"]
    assert {p.center("decode_tps") or p.center("prefill_tps") for p in pts} == {118.881588, 7100.002165}


def test_combined_tests_are_skipped_with_a_reason(url):
    pg = {**README_JSON[0], "n_prompt": 512, "n_gen": 128}
    out = imp(url, [pg, README_JSON[1]], "pg")
    assert out["imported"] == 1 and "pg512,128" in out["skipped"][0]


def test_export_is_llama_bench_shaped_and_round_trips_into_the_same_series(tmp_path, isolated_env, models_dir):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        json.dumps(
            {
                "name": "x",
                "models": [SMALL],
                "engines": ["llama.cpp"],
                "repetitions": 5,
                "workloads": [{"kind": "generate", "prompt_tokens": [32], "gen_tokens": [8], "depth": [16]}],
            }
        )
    )
    env = dict(os.environ)

    def sb(*a):
        return subprocess.run(
            [sys.executable, "-m", "siliconbench.cli.main", *a],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )

    assert sb("run", str(sweep)).returncode == 0
    out = sb("export", "--out", str(tmp_path / "lb.json"))
    assert out.returncode == 0, out.stderr
    recs = json.loads((tmp_path / "lb.json").read_text())
    assert [(r["n_prompt"], r["n_gen"], r["n_depth"]) for r in recs] == [(32, 0, 16), (0, 8, 48)]
    for r in recs:
        assert {
            "build_commit",
            "build_number",
            "model_type",
            "avg_ts",
            "stddev_ts",
            "avg_ns",
            "samples_ts",
            "samples_ns",
            "n_threads",
            "test_time",
        } <= set(r) and len(r["samples_ts"]) == 5
        assert r["avg_ts"] == pytest.approx(sum(r["samples_ts"]) / 5)
        # llama-bench's defaults as effectively applied: physical cores for pp and tg alike, -fa auto, f16 cache
        assert (r["n_threads"], r["flash_attn"], r["type_k"], r["type_v"]) == (performance_cores(), -1, "f16", "f16")
    jsonl = sb("export", "--format", "llama-bench-jsonl").stdout
    assert [json.loads(line)["samples_ts"] for line in jsonl.splitlines()] == [r["samples_ts"] for r in recs]
    imported = sb("import-llama-bench", str(tmp_path / "lb.json"), "--model", SMALL)
    assert imported.returncode == 0 and "imported 2 tests" in imported.stdout, imported.stderr
    cmp = sb("compare", "-b", "source=siliconbench", "-c", "source=llama-bench", "--format", "json")
    rows = json.loads(cmp.stdout)
    # Same host, model digest, options and lengths: one prefill and one decode series, the same samples.
    assert sorted(r["metric"] for r in rows) == ["decode_tps", "prefill_tps"]
    # One process a side (the same one): the same value, and no verdict from a single process.
    assert all(r["ratio"] == pytest.approx(1.0) and r["verdict"] == "inconclusive" for r in rows)
    assert all(socket.gethostname() in r["series"] for r in rows)


def test_import_cli_matches_a_model_or_names_the_quantizations(tmp_path, isolated_env):
    f = tmp_path / "readme.json"
    f.write_text(json.dumps(README_JSON))
    env = dict(os.environ)
    out = subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", "import-llama-bench", str(f), "--model", SMALL],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0 and "imported 2 tests" in out.stdout, out.stderr  # matched by quantization Q4_K_M
    f.write_text(json.dumps([{**r, "model_type": "qwen2 7B Q5_K - Small"} for r in README_JSON]))
    out = subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", "import-llama-bench", str(f), "--model", SMALL],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 2 and "no GGUF artifact of quantization Q5_K_S" in out.stderr


def test_results_of_stored_imports_export_again(url):
    imp(url, README_JSON, "lb")
    with session_scope(url) as s:
        recs = export_records(load_results(s))
    assert [r["samples_ts"] for r in recs] == [README_JSON[0]["samples_ts"], README_JSON[1]["samples_ts"]]
    assert recs[0]["build_commit"] == "8cf427ff" and recs[0]["build_number"] == 5163


def test_imported_levels_follow_the_manifest_rule_and_migration_0011_corrects_stored_rows(empty_db):
    """Q6_K is q6 and Q5_K_M q5, as siliconbench.contract.manifest.level_of says (the import's own function said q8 and
    'q5_k_m', so imported rows never paired with native ones); 0011 rewrites rows the old function stored."""
    url = empty_db
    types = {
        "Q6_K": ("q6", "q8"),
        "Q5_K_M": ("q5", "q5_k_m"),
        "Q3_K_M": ("q3", "q3_k_m"),
        "IQ4_XS": ("q4", "q4"),
        "F16": ("full", "full"),
        "Q8_0": ("q8", "q8"),
    }
    records = [{**README_JSON[1], "model_type": f"llama 8B {t}", "model_filename": f"m-{t}.gguf"} for t in types]
    imp(url, records, "levels")

    def stored() -> dict[str, tuple[str, str]]:
        with session_scope(url) as s:
            return {j.quant: (j.quant_level, j.spec["quant_level"]) for j in s.scalars(select(Job))}

    assert stored() == {t: (new, new) for t, (new, _old) in types.items()}
    assert all(level_of(t) == new for t, (new, _old) in types.items())
    database.downgrade(url, "0010")  # what the old import left behind
    assert stored() == {t: (old, old) for t, (_new, old) in types.items()}
    database.upgrade(url)
    assert stored() == {t: (new, new) for t, (new, _old) in types.items()}
