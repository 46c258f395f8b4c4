"""Serving: a serve sweep's engines as latency–throughput curves (TTFT p99 and TPOT p99 against the request rate
achieved, the objectives drawn in) and the table of every run. Reads through siliconbench.coordinator.reports.serving."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from siliconbench.coordinator.reports.serving import objectives, serve_points
from siliconbench.dashboard import data
from siliconbench.dashboard.serve_plot import latency_curves, pareto_chart

st.title("Serving")
st.caption(
    "Run a sweep with a `serve` workload (examples/serve.yaml: your prompts, request rates, objectives) and pick it. "
    "Each point is one job: requests sent at the asked rate, Poisson arrivals; x is the rate the server completed them "
    "at, y the 99th percentile latency, as vLLM's bench serve defines TTFT and TPOT. A curve bending up is a server "
    "past what it can sustain; the dashed line is the objective."
)

records = data.picked_sweep_records("serve_sweep")
points = serve_points(records)
if not points:
    st.info("This sweep has no successful serve jobs: add a `kind: serve` workload (examples/serve.yaml).")
    st.stop()
slo = objectives(records)
st.altair_chart(latency_curves(points, slo), key="serve_curves")
if len({p.max_concurrency for p in points if p.max_concurrency}) > 1:
    st.subheader("Concurrency sweep: throughput against tail latency")
    st.caption(
        "One point per client concurrency (max_concurrency: a list); the line joins each series' Pareto frontier, the "
        "concurrencies no other beats on both throughput and latency. Past the frontier's knee, more in flight buys "
        "latency, not tokens."
    )
    st.altair_chart(
        alt.hconcat(pareto_chart(points, "ttft_p99_ms", "TTFT p99"), pareto_chart(points, "tpot_p99_ms", "TPOT p99")),
        key="serve_pareto",
    )
st.dataframe(
    pd.DataFrame(
        [
            {
                "series": p.series,
                "rate asked": "all at once" if p.asked_rate is None else p.asked_rate,
                "concurrency": p.max_concurrency,
                "sent req/s": p.sent_rps,
                "served req/s": p.achieved_rps,
                "output tok/s": p.output_tps,
                "TTFT p50 ms": p.ttft_p50_ms,
                "TTFT p99 ms": p.ttft_p99_ms,
                "TPOT p50 ms": p.tpot_p50_ms,
                "TPOT p99 ms": p.tpot_p99_ms,
                "goodput req/s": p.goodput_rps,
                "failed": p.failed,
                "requests": p.requests,
                "client behind": p.client_behind,
            }
            for p in points
        ]
    ),
    hide_index=True,
    width="stretch",
    key="serve_table",
    column_config={
        c: st.column_config.NumberColumn(format="%.2f")
        for c in (
            "sent req/s",
            "served req/s",
            "output tok/s",
            "TTFT p50 ms",
            "TTFT p99 ms",
            "TPOT p50 ms",
            "TPOT p99 ms",
            "goodput req/s",
        )
    },
)
