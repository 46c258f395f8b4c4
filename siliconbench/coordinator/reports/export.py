"""The export contract: one JSON record per result, with stable names, and its flat CSV form.

Every mean, median, stddev, min and max here comes from ``siliconbench.contract.aggregate.summarize`` over the
measured (non-warmup) samples; nothing else in the export computes an aggregate.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from siliconbench.contract.aggregate import Summary, stability_warnings, summarize
from siliconbench.contract.engines import ENGINE_PACKAGE
from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.metrics import HEADLINE, METRICS
from siliconbench.contract.results import JobResult, JobStatus
from siliconbench.contract.workloads.base import BODY_SUFFIX

from siliconbench.storage.result_store import load_stored

COUNTER_METRICS = ("engine_prefill_tps", "engine_decode_tps")
HOST_FIELDS = ("hostname", "os", "chip", "cores", "memory_bytes")
SUMMARY_FIELDS = ("mean", "median", "stddev", "min", "max")

RECORD_KEYS = (
    "job_id",
    "sweep",
    "sweep_id",
    "status",
    "error",
    "engine",
    "engine_version",
    "commit",
    "backend",
    "model",
    "quant",
    "quant_level",
    "workload",
    "n_prompt",
    "n_gen",
    "n_depth",
    "repetitions",
    "process",
    "prefill_tps",
    "decode_tps",
    "ttft_ms",
    "load_s",
    "peak_memory_bytes",
    "host",
    "created_at",
    "worker",
    "warmup_samples",
    "environment",
    "identity_hash",
    "engine_counters",
    "unstable",
    "stderr_tail",
    "params",
    "metrics",
    "extra",
)


def summary_dict(s: Summary | None) -> dict | None:
    """``{mean, median, stddev, min, max, samples}`` of a Summary, or None."""
    if s is None:
        return None
    return {**{f: getattr(s, f) for f in SUMMARY_FIELDS}, "samples": list(s.samples)}


def metric_summary(s: Summary) -> dict:
    """A summary in ``metrics``: the summary_dict fields, the 90th/99th percentiles, the count, and the total where
    the metric is a count (siliconbench.contract.metrics.Metric.kind)."""
    total = {"total": s.total} if s.total is not None else {}
    return {
        **{f: getattr(s, f) for f in SUMMARY_FIELDS},
        "p90": s.p90,
        "p99": s.p99,
        **total,
        "count": s.count,
        "samples": list(s.samples),
    }


def workload_metrics(result: JobResult) -> dict[str, dict]:
    """Every metric present in the measured samples (registry order, then any other), summarized."""
    present = {m for s in result.samples if not s.warmup for m in s.values}
    names = [m for m in METRICS if m in present] + sorted(present - set(METRICS))
    return {m: metric_summary(result.summary(m)) for m in names}


def engine_version_of(job: JobSpec, result: JobResult) -> str | None:
    """The engine version a result ran: its package's version; for a llama.cpp build (measured through the
    binding or its llama-bench) the name the sweep gave it (b7123), its commit beside it in the record."""
    env = result.environment
    if env is not None and (env.engine_build or {}).get("measured_by"):
        return job.engine_version
    return (env.packages.get(ENGINE_PACKAGE[job.engine]) if env else None) or job.engine_version


def result_record(
    job: JobSpec, result: JobResult, *, worker: str | None = None, created_at: datetime | None = None
) -> dict:
    """The export record of one result. ``created_at`` defaults to the result's finish time.

    ``metrics`` holds every metric of the result (the workload's own included); the top-level metric keys
    are the generate workload's, kept for readers of the first contract.
    """
    env = result.environment
    summaries = {m: summarize(result.measured(m)) for m in HEADLINE + COUNTER_METRICS}
    metrics = workload_metrics(result)
    if job.workload != "generate":  # stability of each repetition-level figure (not per request, gap, or count)
        stable = {
            m: summarize(result.measured(m))
            for m in metrics
            if m in METRICS and METRICS[m].scope == "repetition" and METRICS[m].unit not in ("requests", "fraction")
        }
    else:
        stable = summaries
    when = created_at or result.finished_at
    return {
        "job_id": job.job_id,
        "sweep": job.sweep_name,
        "sweep_id": job.sweep_id,
        "status": "ok" if result.status == JobStatus.ok else "failed",
        "error": result.error,
        "engine": job.engine,
        "engine_version": engine_version_of(job, result),
        "commit": ((env.engine_build or {}).get("commit") or None) if env else None,
        "backend": (env.backend or None) if env else None,
        "model": job.model,
        "quant": job.quant,
        "quant_level": job.quant_level,
        "workload": job.workload,
        "n_prompt": job.n_prompt,
        "n_gen": job.n_gen,
        "n_depth": job.n_depth,
        "repetitions": job.repetitions,
        "process": job.process,
        **{m: summary_dict(summaries[m]) for m in HEADLINE},
        "load_s": result.load_s,
        "peak_memory_bytes": result.peak_memory_bytes,
        "host": {f: getattr(env, f) if env else None for f in HOST_FIELDS},
        "created_at": when.isoformat() if when else None,
        "worker": worker,
        "warmup_samples": [s.model_dump(mode="json") for s in result.samples if s.warmup],
        "environment": env.model_dump(mode="json") if env else None,
        "identity_hash": result.identity_hash(job),
        "engine_counters": {m: summary_dict(summaries[m]) for m in COUNTER_METRICS if summaries[m] is not None},
        "unstable": stability_warnings(stable),
        "stderr_tail": result.stderr_tail,
        # a user's file travels with the job as "<setting>_body"; the record keeps its digest ("text", "prompts")
        "params": {k: v for k, v in job.params.items() if not k.endswith(BODY_SUFFIX)},
        "metrics": metrics,
        "extra": dict(result.extra),
    }


def load_records(session: Session, sweep_id: str | None = None, job_ids=None) -> list[dict]:
    """Export records of stored results, with the worker that ran each and when it was stored."""
    return [
        result_record(s.job, s.result, worker=s.worker, created_at=s.created_at)
        for s in load_stored(session, sweep_id, job_ids)
    ]


CSV_SCALARS = (
    "job_id",
    "sweep",
    "sweep_id",
    "status",
    "engine",
    "engine_version",
    "commit",
    "backend",
    "model",
    "quant",
    "quant_level",
    "workload",
    "n_prompt",
    "n_gen",
    "n_depth",
    "repetitions",
    "process",
)
CSV_STATS = ("mean", "median", "stddev", "n")


def to_csv_rows(records: list[dict]) -> list[dict]:
    """One flat row per record, the same columns in every row: scalars, then ``<metric>_mean`` /
    ``_median`` / ``_stddev`` / ``_n`` for each metric, memory, host, and the rest as text."""
    rows = []
    for r in records:
        row = {k: r[k] for k in CSV_SCALARS}
        metrics = {m: r[m] for m in HEADLINE} | {m: r["engine_counters"].get(m) for m in COUNTER_METRICS}
        for m, s in metrics.items():
            for stat in CSV_STATS:
                row[f"{m}_{stat}"] = (len(s["samples"]) if stat == "n" else s[stat]) if s else None
        row |= {"load_s": r["load_s"], "peak_memory_bytes": r["peak_memory_bytes"]}
        row |= {f"host_{f}": r["host"][f] for f in HOST_FIELDS}
        row |= {
            "worker": r["worker"],
            "created_at": r["created_at"],
            "identity_hash": r["identity_hash"],
            "unstable": "; ".join(r["unstable"]),
            "error": r["error"],
        }
        rows.append(row)
    return rows
