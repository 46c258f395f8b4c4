"""llama-bench interop: its JSON, JSONL, CSV and SQL output into the results store, and ours out in its JSON shape.

One llama-bench record is one test: prompt processing (``n_prompt`` > 0, ``n_gen`` = 0; its ``samples_ts``
become ``prefill_tps`` samples) or text generation (``n_prompt`` = 0; ``decode_tps``), at context depth
``n_depth``. Through ``coordinator.history.points``'s per-metric lengths, ``pp512`` joins the prefill series of
siliconbench jobs with a 512-token prompt at depth 0, and ``tg128 @ d512`` the decode series of jobs that
generate 128 tokens after 512 (prompt + depth). Combined tests (``-pg``: both > 0) time prompt and
generation together, which no siliconbench metric does; they are skipped and counted.

JSON and JSONL carry the raw repetitions (``samples_ts``); CSV and SQL only ``avg_ts`` / ``stddev_ts``:
those import without raw samples (their average is kept, and shown in histories) and ``compare`` calls
such rows insufficient data rather than inventing samples. An import is one sweep whose id is a digest of
the file, so importing the same file twice stores it once.

llama-bench records no host name: ``--host`` names the machine (default: this one). With ``--model`` the
records are matched to a model of the models folder by quantization (or file name), so they join that
model's series; otherwise the model is named after the file and identified by its size and parameters.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy.orm import Session

from siliconbench.aggregate import summarize
from siliconbench.errors import UserError
from siliconbench.jobs import JobSpec, digest, recorded_options
from siliconbench.manifest import ModelCatalog, level_of, weight_dtype
from siliconbench.results import Environment, JobResult, JobStatus, Sample
from siliconbench.spec import LlamaCppOptions, parse_sweep

from storage import result_store, sweep_store
from storage.database import session_scope

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


# ------------------------------------------------------------------------------------------- parsing


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


def _int(v, default: int = 0) -> int:
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return default


def _bool(v) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes")
    return bool(v)


def _samples(v) -> list[float]:
    if v is None or v == "":
        return []
    if isinstance(v, str):  # CSV/SQL flavours that carry them as text
        v = [x for x in re.split(r"[\s,;]+", v.strip("[] ")) if x]
    return [float(x) for x in v]


def _time(v) -> datetime | None:
    if not v:
        return None
    try:
        t = datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _options(r: dict) -> dict:
    opts = recorded_options(LlamaCppOptions())  # the same option names a siliconbench job records
    opts.update(
        n_batch=_int(r.get("n_batch"), opts["n_batch"]),
        n_ubatch=_int(r.get("n_ubatch"), opts["n_ubatch"]),
        n_gpu_layers=_int(r.get("n_gpu_layers"), opts["n_gpu_layers"]),
    )
    if "use_mmap" in r:
        opts["use_mmap"] = _bool(r["use_mmap"])
    fa = r.get("flash_attn")
    if fa is not None:
        opts["flash_attn"] = "auto" if str(fa).strip() == "-1" else ("on" if _bool(fa) else "off")
    for k in ("type_k", "type_v"):
        if r.get(k):
            opts[k] = str(r[k]).lower()
    return {"threads": _int(r.get("n_threads")) or None, **opts}


# ------------------------------------------------------------------------------------------- import


def to_results(
    records: list[dict], *, sweep_id: str, host: str, catalog: ModelCatalog | None = None, model: str | None = None
) -> tuple[list[tuple[JobSpec, JobResult]], list[str]]:
    """(job, result) pairs for the store, and a reason for each record skipped."""
    manifest = catalog.get(model, field="--model") if (catalog and model) else None
    pairs, skipped = [], []
    for i, r in enumerate(records):
        n_prompt, n_gen, n_depth = _int(r.get("n_prompt")), _int(r.get("n_gen")), _int(r.get("n_depth"))
        if n_prompt and n_gen:
            skipped.append(f"record {i}: pg{n_prompt},{n_gen} times prompt and generation together")
            continue
        if not n_prompt and not n_gen:
            skipped.append(f"record {i}: neither n_prompt nor n_gen")
            continue
        if str(r.get("backends", "")).startswith("MLX"):
            skipped.append(f"record {i}: an MLX result in llama-bench's shape (siliconbench's own export)")
            continue
        metric = "prefill_tps" if n_prompt else "decode_tps"
        quant = quant_of(str(r.get("model_type", "")))
        filename = str(r.get("model_filename", ""))
        if manifest is not None:
            arts = [a for a in manifest.artifacts if a.format == "gguf"]
            art = next((a for a in arts if Path(a.path).name == Path(filename).name), None) or next(
                (a for a in arts if a.quant.upper() == quant), None
            )
            if art is None:
                raise UserError(
                    "--model",
                    f"model {model!r} has no GGUF artifact of quantization {quant} "
                    f"(record {i}: {r.get('model_type')!r}).",
                    [a.quant for a in arts],
                )
            name, quant, level, artifact, sha = (
                manifest.name,
                art.quant,
                art.level,
                f"{manifest.name}/{art.path}",
                art.sha256,
            )
        else:
            name = Path(filename).stem or str(r.get("model_type"))
            level, artifact = import_level(quant), filename
            sha = "llama-bench:" + digest(
                {
                    "file": Path(filename).name,
                    "size": _int(r.get("model_size")),
                    "params": _int(r.get("model_n_params")),
                }
            )
        ts = _samples(r.get("samples_ts"))
        opts = _options(r)
        job = JobSpec(
            job_id="",
            sweep_id=sweep_id,
            sweep_name="llama-bench",
            index=len(pairs),
            model=name,
            engine="llama.cpp",
            quant=quant,
            quant_level=level,
            artifact=artifact,
            model_sha256=sha,
            n_prompt=n_prompt,
            n_gen=n_gen,
            n_depth=n_depth,
            repetitions=len(ts),
            warmup=0,
            delay_s=0.0,
            seed=0,
            timeout_s=1,
            engine_options=opts,
        )
        job.job_id = digest({"sweep": sweep_id, "record": i, **job.key()})
        when = _time(r.get("test_time"))
        build = {
            "commit": str(r.get("build_commit", "")),
            "gpu_info": str(r.get("gpu_info", "")),
            "source": "llama-bench",
        }
        if _int(r.get("build_number")) > 0:
            build["build_number"] = str(_int(r.get("build_number")))
        env = Environment(
            hostname=host,
            os="",
            os_version="",
            chip=str(r.get("cpu_info", "")),
            cores=0,
            memory_bytes=0,
            machine="",
            python="",
            packages={},
            engine_build=build,
            backend=str(r.get("backends", "")),
            blas="",
            engine_options=opts,
        )
        reported = {metric: float(r["avg_ts"])} if r.get("avg_ts") not in (None, "") else {}
        result = JobResult(
            job_id=job.job_id,
            status=JobStatus.ok,
            started_at=when,
            finished_at=when or datetime.now(timezone.utc),
            samples=[Sample(repetition=k, values={metric: v}) for k, v in enumerate(ts)],
            environment=env,
            extra={"source": "llama-bench", "llama_bench": {"reported": reported, "record": r}},
        )
        pairs.append((job, result))
    return pairs, skipped


def import_records(
    session: Session,
    records: list[dict],
    *,
    sweep_id: str,
    host: str,
    source: str,
    catalog: ModelCatalog | None = None,
    model: str | None = None,
) -> dict:
    """Store llama-bench records as one sweep; UserError if this sweep (the same file) was imported before."""
    pairs, skipped = to_results(records, sweep_id=sweep_id, host=host, catalog=catalog, model=model)
    if not pairs:
        raise UserError(source, "holds no test siliconbench can import: " + "; ".join(skipped))
    jobs = [j for j, _ in pairs]
    spec = parse_sweep(
        {
            "name": "llama-bench",
            "description": f"imported from {source}",
            "models": sorted({j.model for j in jobs}),
            "engines": ["llama.cpp"],
            "quantizations": sorted({j.quant for j in jobs}),
            "repetitions": max(1, max(j.repetitions for j in jobs)),
        }
    )
    try:
        sweep_store.create_sweep(session, sweep_id, spec, jobs)
    except UserError:
        raise UserError(source, f"was imported before (sweep {sweep_id}).") from None
    for job, result in pairs:
        result_store.save_result(session, job, result, host=host, worker="llama-bench")
    sweep_store.refresh_sweep_status(session, sweep_id)
    return {
        "sweep_id": sweep_id,
        "imported": len(pairs),
        "skipped": skipped,
        "raw_samples": sum(bool(r.samples) for _, r in pairs),
    }


def import_file(url: str, path: Path, *, host: str, models_dir: Path | None = None, model: str | None = None) -> dict:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError("FILE", f"cannot read {path}: {exc.strerror}.") from None
    records = parse(data.decode(errors="replace"), source=str(path))
    sweep_id = f"llama-bench-{digest(data.hex(), 12)}"
    catalog = ModelCatalog(models_dir) if (model and models_dir) else None
    with session_scope(url) as s:
        return import_records(s, records, sweep_id=sweep_id, host=host, source=path.name, catalog=catalog, model=model)


# ------------------------------------------------------------------------------------------- export


def _flash_attn_field(value) -> int:
    """llama-bench writes the requested llama_flash_attn_type: -1 auto, 0 off, 1 on."""
    if isinstance(value, str) and value in ("auto", "on", "off"):
        return {"auto": -1, "off": 0, "on": 1}[value]
    return int(_bool(value))


def _record(job: JobSpec, result: JobResult, *, n_prompt: int, n_gen: int, n_depth: int, ts: list[float]) -> dict:
    env = result.environment
    build = (env.engine_build if env else {}) or {}
    opts = {**job.engine_options, **((env.engine_options if env else {}) or {})}
    n = n_prompt + n_gen
    ns = [n / v * 1e9 for v in ts if v > 0]
    s_ts, s_ns = summarize(ts), summarize(ns)
    if job.engine == "llama.cpp":
        commit, backends = build.get("commit", ""), (env.backend if env else "") or "CPU"
    else:
        pk = env.packages if env else {}
        commit = f"mlx-lm {pk.get('mlx-lm', '?')} / mlx {pk.get('mlx', '?')}"
        backends = f"MLX ({env.backend})" if env and env.backend else "MLX"
    when = result.started_at or result.finished_at
    return {
        "build_commit": commit,
        "build_number": _int(build.get("build_number")),
        "cpu_info": env.chip if env else "",
        "gpu_info": build.get("gpu_info", ""),
        "backends": backends,
        "model_filename": job.artifact,
        "model_type": f"{job.model} {job.quant}",
        "model_size": 0,
        "model_n_params": 0,
        "n_batch": _int(opts.get("n_batch")),
        "n_ubatch": _int(opts.get("n_ubatch")),
        # a pp test runs on the batch threads, a tg test on the decode threads (equal unless a user split them)
        "n_threads": _int(opts.get("threads_batch") if n_prompt else opts.get("threads")) or _int(opts.get("threads")),
        "type_k": opts.get("type_k", "f16"),
        "type_v": opts.get("type_v", "f16"),
        "n_gpu_layers": _int(opts.get("n_gpu_layers"), 99) if opts.get("n_gpu_layers") != "all" else 99,
        "flash_attn": _flash_attn_field(opts.get("flash_attn")),
        "use_mmap": _bool(opts.get("use_mmap", True)),
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "n_depth": n_depth,
        "test_time": when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if when else "",
        "avg_ns": round(s_ns.mean) if s_ns else 0,
        "stddev_ns": round(s_ns.stddev) if s_ns else 0,
        "avg_ts": s_ts.mean if s_ts else 0.0,
        "stddev_ts": s_ts.stddev if s_ts else 0.0,
        "samples_ns": [round(x) for x in ns],
        "samples_ts": list(ts),
    }


def export_records(pairs: list[tuple[JobSpec, JobResult]], engines: tuple[str, ...] = ("llama.cpp",)) -> list[dict]:
    """llama-bench-shaped records of stored results: a pp test from prefill, a tg test from decode
    (at depth = the job's depth + prompt, where siliconbench's decode starts). MLX results only when
    asked for: their ``backends`` reads ``MLX (...)`` and ``build_commit`` the mlx-lm and mlx versions."""
    out = []
    for job, result in pairs:
        if result.status != JobStatus.ok or job.workload != "generate" or job.engine not in engines:
            continue
        pre, dec = result.measured("prefill_tps"), result.measured("decode_tps")
        if pre and job.n_prompt:
            out.append(_record(job, result, n_prompt=job.n_prompt, n_gen=0, n_depth=job.n_depth, ts=pre))
        if dec and job.n_gen:
            out.append(_record(job, result, n_prompt=0, n_gen=job.n_gen, n_depth=job.n_depth + job.n_prompt, ts=dec))
    return out


def dumps(records: list[dict], fmt: str) -> str:
    if fmt == "llama-bench-jsonl":
        return "".join(json.dumps(r) + "\n" for r in records)
    return json.dumps(records, indent=2) + "\n"
