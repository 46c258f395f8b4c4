"""A serve sweep's latency–throughput curves (altair): TTFT p99 and TPOT p99 against the request rate achieved, one
line per series, the objective drawn as a dashed rule. Drawn on the dashboard's Serving page."""

from __future__ import annotations

import altair as alt
import pandas as pd

from siliconbench.coordinator.reports.serving import ServePoint, pareto_front

PANELS = (("ttft_p99_ms", "TTFT p99 (ms)", "ttft_ms"), ("tpot_p99_ms", "TPOT p99 (ms)", "tpot_ms"))


def curve_frame(points: list[ServePoint]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "series": p.series,
                "engine": p.engine,
                "asked": "all at once" if p.asked_rate is None else f"{p.asked_rate:g}/s",
                "achieved req/s": p.achieved_rps,
                "ttft_p99_ms": p.ttft_p99_ms,
                "tpot_p99_ms": p.tpot_p99_ms,
                "output tok/s": p.output_tps,
                "job": p.job_id,
            }
            for p in points
        ]
    )


def latency_curves(points: list[ServePoint], slo: dict) -> alt.HConcatChart:
    """Two panels side by side; each point a job, labelled by the rate asked, with the objective where one was set."""
    frame = curve_frame(points)
    panels = []
    for column, title, objective in PANELS:
        base = alt.Chart(frame).encode(
            x=alt.X("achieved req/s:Q", title="achieved request rate (req/s)"),
            # log: latencies past saturation grow by orders of magnitude, and the objective must not flatten the rest
            y=alt.Y(f"{column}:Q", title=f"{title}, log scale", scale=alt.Scale(type="log")),
            color=alt.Color(
                "series:N",
                scale=alt.Scale(scheme="tableau10"),
                legend=alt.Legend(orient="bottom", columns=1, labelLimit=600),
            ),
            tooltip=["series", "asked", "achieved req/s", column, "output tok/s", "job"],
        )
        layer = base.mark_line(point=alt.OverlayMarkDef(size=70, filled=True)).encode(order="achieved req/s:Q")
        if objective in slo:
            rule = (
                alt.Chart(pd.DataFrame({"objective": [slo[objective]]}))
                .mark_rule(strokeDash=[6, 4], color="#c0392b", strokeWidth=2)
                .encode(y="objective:Q", tooltip=[alt.Tooltip("objective:Q", title=f"objective {title}")])
            )
            layer = layer + rule
        panels.append(layer.properties(width=420, height=320, title=title))
    return alt.hconcat(*panels)


def pareto_chart(points: list[ServePoint], latency: str, title: str) -> alt.LayerChart:
    """A concurrency sweep's Pareto view: output tokens/s against a p99 latency, every job a point labelled by its
    concurrency, and each series' frontier (the points nothing beats on both) joined by a line."""
    frame = pd.DataFrame(
        [
            {
                "series": p.series,
                "concurrency": p.max_concurrency or 0,
                "label": f"≤{p.max_concurrency}" if p.max_concurrency else "∞",
                "latency": getattr(p, latency),
                "output tok/s": p.output_tps,
                "job": p.job_id,
            }
            for p in points
            if getattr(p, latency) is not None
        ]
    )
    front = {p.job_id for p in pareto_front(points, latency)}
    frame["frontier"] = frame["job"].isin(front)
    color = alt.Color("series:N", scale=alt.Scale(scheme="tableau10"), legend=alt.Legend(orient="bottom", columns=1))
    base = alt.Chart(frame).encode(
        x=alt.X("latency:Q", title=f"{title} (ms), log scale", scale=alt.Scale(type="log")),
        y=alt.Y("output tok/s:Q", title="output tokens/s"),
        color=color,
        tooltip=["series", "concurrency", "latency", "output tok/s", "frontier", "job"],
    )
    dots = base.mark_point(size=80, filled=True)
    labels = base.mark_text(dx=10, dy=-8, align="left").encode(text="label:N")
    line = base.transform_filter(alt.datum.frontier).mark_line().encode(order="latency:Q")
    return (line + dots + labels).properties(width=420, height=320, title=f"output tok/s against {title}")
