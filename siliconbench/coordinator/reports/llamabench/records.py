"""llama-bench's records as its outputs hold them: JSON, JSONL, CSV or SQL read into dicts, its model type read as our
quantization and level, and its fields' values read tolerantly (CSV and SQL carry everything as text)."""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
from datetime import UTC, datetime

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import level_of, weight_dtype

FIELDS = (
    "build_commit",
    "build_number",
    "cpu_info",
    "gpu_info",
    "backends",
    "model_filename",
    "model_type",
    "model_size",
    "model_n_params",
    "n_batch",
    "n_ubatch",
    "n_threads",
    "type_k",
    "type_v",
    "n_gpu_layers",
    "flash_attn",
    "use_mmap",
    "n_prompt",
    "n_gen",
    "n_depth",
    "test_time",
    "avg_ns",
    "stddev_ns",
    "avg_ts",
    "stddev_ts",
    "samples_ns",
    "samples_ts",
)
SQL_TABLES = ("llama_bench", "test")  # current and older llama-bench
_KQUANT = {"small": "S", "medium": "M", "large": "L"}


def parse(text: str, source: str = "llama-bench output") -> list[dict]:
    """llama-bench records from its JSON, JSONL, CSV or SQL output (detected from the text)."""
    body = text.strip()
    if not body:
        raise UserError(source, "is empty.")
    try:
        if body.startswith("["):
            records = json.loads(body)
        elif body.startswith("{"):
            records = [json.loads(line) for line in body.splitlines() if line.strip()]
        elif re.search(r"\bINSERT\s+INTO\b", body, re.I):
            records = _from_sql(body)
        elif body.startswith(("build_commit", '"build_commit"')):
            records = list(csv.DictReader(io.StringIO(body)))
        else:
            raise UserError(source, "is not llama-bench output (-o json, jsonl, csv or sql).")
    except (json.JSONDecodeError, sqlite3.Error) as exc:
        raise UserError(source, f"cannot be read as llama-bench output: {exc}.") from None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise UserError(source, "must hold llama-bench test objects.")
    for i, r in enumerate(records):
        missing = [f for f in ("build_commit", "model_type", "n_prompt", "n_gen") if f not in r]
        if missing:
            raise UserError(f"{source}: record {i}", f"lacks {', '.join(missing)}.")
    return records


def _from_sql(body: str) -> list[dict]:
    con = sqlite3.connect(":memory:")
    try:
        con.executescript(body)
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        table = next((t for t in SQL_TABLES if t in names), None)
        if table is None:
            raise UserError("llama-bench SQL", f"creates none of the tables {', '.join(SQL_TABLES)}.")
        con.row_factory = sqlite3.Row
        return [dict(r) for r in con.execute(f"SELECT * FROM {table}")]  # noqa: S608 (a known name)
    finally:
        con.close()


def quant_of(model_type: str) -> str:
    """'qwen2 7B Q4_K - Medium' -> Q4_K_M; 'llama 7B mostly Q4_0' -> Q4_0; 'llama ?B F16' -> F16."""
    t = model_type.strip()
    m = re.search(r"\b((?:I?Q\d+_K|IQ\d+_[A-Z]+))\s*-\s*(Small|Medium|Large)\b", t, re.I)
    if m:
        return f"{m.group(1).upper()}_{_KQUANT[m.group(2).lower()]}"
    m = re.search(r"\b(I?Q\d+(?:_[0-9A-Z]+)*|BF16|F16|F32|TQ\d_\d)\s*$", t, re.I)
    return m.group(1).upper() if m else (t.split()[-1].upper() if t else "unknown")


def import_level(quant: str) -> str:
    """The level of an imported record's type: the manifest's one rule (Q6_K is q6, Q5_K_M q5), and a type with no
    level (1-bit, unknown) its own dtype name, so it pairs only with itself."""
    return level_of(quant) or weight_dtype(quant)


def as_int(v, default: int = 0) -> int:
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return default


def as_bool(v) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes")
    return bool(v)


def as_samples(v) -> list[float]:
    if v is None or v == "":
        return []
    if isinstance(v, str):  # CSV/SQL flavours that carry them as text
        v = [x for x in re.split(r"[\s,;]+", v.strip("[] ")) if x]
    return [float(x) for x in v]


def as_time(v) -> datetime | None:
    if not v:
        return None
    try:
        t = datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)
