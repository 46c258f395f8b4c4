"""A serve sweep as latency–throughput curves: one point per job (a request rate, a concurrency), one curve per series (model, engine,
quantization, server and its slots, engine version), from export records. Read by the dashboard's Serving page; the
CLI prints the same jobs as the serve table (workload_tables)."""

from __future__ import annotations

from dataclasses import dataclass

from siliconbench.coordinator.reports.tables import version_cell
from siliconbench.coordinator.reports.workload_tables import served_by


@dataclass(frozen=True)
class ServePoint:
    series: str
    engine: str
    asked_rate: float | None  # None: 'inf', every request at once
    achieved_rps: float  # serve_request_throughput: requests completed per second
    sent_rps: float | None
    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float | None
    tpot_p99_ms: float | None
    output_tps: float
    goodput_rps: float | None
    failed: int
    job_id: str
    max_concurrency: int | None = None  # the client's limit: a concurrency sweep's axis
    requests: int = 0  # successful requests behind the TTFT percentiles
    client_behind: bool = False


def pareto_front(points: list[ServePoint], latency: str = "ttft_p99_ms") -> list[ServePoint]:
    """The points no other point of their series beats on both throughput (output tok/s, higher) and ``latency``
    (lower): the configurations worth choosing between, GuideLLM's and vLLM's Pareto view of a concurrency sweep.
    Ordered by series, then latency."""
    front = []
    for p in points:
        mine = getattr(p, latency)
        if mine is None:
            continue
        beaten = any(
            q is not p
            and q.series == p.series
            and getattr(q, latency) is not None
            and getattr(q, latency) <= mine
            and q.output_tps >= p.output_tps
            and (getattr(q, latency) < mine or q.output_tps > p.output_tps)
            for q in points
        )
        if not beaten:
            front.append(p)
    return sorted(front, key=lambda p: (p.series, getattr(p, latency)))


def series_of(r: dict) -> str:
    """What a curve is: the results a user would join with a line (never two identities in one line)."""
    return f"{r['model']} · {r['engine']} {version_cell(r)} {r['quant']} · {served_by(r)}"


def _stat(r: dict, metric: str, key: str) -> float | None:
    s = (r.get("metrics") or {}).get(metric)
    return s.get(key) if s else None


def serve_points(records: list[dict]) -> list[ServePoint]:
    """The sweep's successful serve jobs as points, ordered by series then asked rate ('inf' last)."""
    out = []
    for r in records:
        if r.get("workload") != "serve" or r.get("status") != "ok":
            continue
        params = r.get("params") or {}
        rate = params.get("request_rate")
        out.append(
            ServePoint(
                series=series_of(r),
                engine=r["engine"],
                asked_rate=None if rate == "inf" else float(rate),
                achieved_rps=_stat(r, "serve_request_throughput", "mean") or 0.0,
                sent_rps=_stat(r, "serve_sent_rate", "mean"),
                ttft_p50_ms=_stat(r, "serve_ttft_ms", "median"),
                ttft_p99_ms=_stat(r, "serve_ttft_ms", "p99"),
                tpot_p50_ms=_stat(r, "serve_tpot_ms", "median"),
                tpot_p99_ms=_stat(r, "serve_tpot_ms", "p99"),
                output_tps=_stat(r, "serve_output_throughput", "mean") or 0.0,
                goodput_rps=_stat(r, "serve_request_goodput", "mean"),
                failed=int(_stat(r, "serve_failed_requests", "total") or 0),
                job_id=r["job_id"],
                max_concurrency=params.get("max_concurrency"),
                requests=int(_stat(r, "serve_ttft_ms", "count") or 0),
                client_behind=bool((r.get("extra") or {}).get("client_behind")),
            )
        )
    return sorted(out, key=lambda p: (p.series, p.asked_rate is None, p.asked_rate or 0.0, p.max_concurrency or 0))


def objectives(records: list[dict]) -> dict:
    """The objectives the sweep's serve jobs were judged by (the first found; a sweep has one per workload)."""
    for r in records:
        slo = (r.get("params") or {}).get("slo") if r.get("workload") == "serve" else None
        if slo:
            return slo
    return {}
