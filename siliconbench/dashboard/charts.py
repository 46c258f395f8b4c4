"""Altair charts: the Compare page (grouped bars with error bars, raw-sample distribution, scaling) and a bisection's timeline."""

from __future__ import annotations

import altair as alt
import pandas as pd

from siliconbench.contract.metrics import METRICS

ENGINE_COLORS = alt.Scale(domain=["llama.cpp", "mlx"], range=["#4c78a8", "#f58518"])


def _axis_title(metric: str) -> str:
    m = METRICS[metric]
    return f"{metric} ({m.unit}, {m.better} is better)"


def bars(frame: pd.DataFrame, metric: str) -> alt.Chart:
    """One bar per series (identity), grouped by configuration, whiskers at mean ± stddev."""
    base = alt.Chart(frame).encode(
        x=alt.X("config:N", title=None, axis=alt.Axis(labelAngle=-20, labelLimit=320)),
        xOffset=alt.XOffset("series:N"),
    )
    bar = base.mark_bar().encode(
        y=alt.Y("mean:Q", title=_axis_title(metric)),
        color=alt.Color("engine:N", scale=ENGINE_COLORS),
        tooltip=[
            "config",
            "series",
            alt.Tooltip("mean:Q", format=",.2f"),
            alt.Tooltip("stddev:Q", format=",.2f"),
            "n",
            "identity",
        ],
    )
    # A rule, not mark_errorbar: the composite mark ignores xOffset and would sit between the bars.
    whiskers = base.mark_rule(strokeWidth=1.5, color="#333").encode(y="lo:Q", y2="hi:Q")
    return (bar + whiskers).properties(height=360)


def distribution(samples: pd.DataFrame, metric: str) -> alt.Chart:
    """Every measured sample, per series: a box (quartiles, min–max) and the points themselves."""
    enc = dict(
        x=alt.X("series:N", title=None, axis=alt.Axis(labels=False, ticks=False)),
        y=alt.Y("value:Q", title=_axis_title(metric), scale=alt.Scale(zero=False)),
        color=alt.Color("engine:N", scale=ENGINE_COLORS),
    )
    box = alt.Chart(samples).mark_boxplot(extent="min-max", opacity=0.35).encode(**enc)
    points = (
        alt.Chart(samples)
        .mark_circle(size=28, opacity=0.8)
        .encode(**enc, tooltip=["config", "series", "repetition", alt.Tooltip("value:Q", format=",.2f"), "job_id"])
    )
    per_panel = max(samples.groupby("config")["series"].nunique().max(), 1)
    layered = (box + points).properties(width=70 * per_panel, height=320)
    # Composite marks (boxplot) ignore xOffset: one panel per configuration instead, side by side.
    return layered.facet(
        column=alt.Column(
            "config:N", title=None, header=alt.Header(labelOrient="bottom", labelAngle=-20, labelLimit=260)
        )
    )


def scaling(frame: pd.DataFrame, metric: str, x: str) -> alt.Chart:
    """Mean ± stddev against prompt length or depth; one line per series of otherwise equal identities."""
    title = {"n_prompt": "prompt tokens", "n_depth": "context depth (tokens)"}[x]
    base = alt.Chart(frame).encode(x=alt.X(f"{x}:Q", title=title), color=alt.Color("line:N", title="series"))
    line = base.mark_line(point=True).encode(
        y=alt.Y("mean:Q", title=_axis_title(metric)),
        tooltip=["line", x, alt.Tooltip("mean:Q", format=",.2f"), alt.Tooltip("stddev:Q", format=",.2f"), "n"],
    )
    whiskers = base.mark_rule().encode(y="lo:Q", y2="hi:Q")
    return (line + whiskers).properties(height=360)


VERDICT_COLORS = alt.Scale(
    domain=["good end", "good", "bad", "bad end", "first bad", "undecided", "skipped"],
    range=["#2ca02c", "#98df8a", "#ff9896", "#d62728", "#8c0000", "#7f7f7f", "#c7c7c7"],
)


def bisection_timeline(rec: dict) -> list[dict]:
    """One row per commit a bisection measured, in commit order: its ratio to the good end with the interval."""
    rows = [{"build": rec["good"]["number"], "commit": rec["good"]["sha"][:12], "subject": rec["good"]["subject"],
             "verdict": "good end", "ratio": 1.0, "ci_low": None, "ci_high": None, "p": None, "processes": None}]  # fmt: skip
    first_bad = (rec.get("first_bad") or {}).get("sha")
    for s in rec["steps"]:
        if s["kind"] == "confirm":  # a re-measurement of the last good and first bad: said beside the chart
            continue
        c, g = s["commit"], s.get("against_good") or {}
        verdict = "bad end" if s["kind"] == "ends" else s["verdict"]
        if c.get("sha") == first_bad and s["kind"] != "ends":
            verdict = "first bad"
        rows.append(
            {
                "build": c.get("number"),
                "commit": c.get("sha", "")[:12],
                "subject": c.get("subject", ""),
                "verdict": verdict,
                "ratio": g.get("ratio"),
                "ci_low": g.get("ci_low"),
                "ci_high": g.get("ci_high"),
                "p": g.get("p_value"),
                "processes": s.get("processes"),
            }
        )
    return sorted(rows, key=lambda r: (r["build"] is None, r["build"] or 0))


def bisection_chart(rows: list[dict], metric: str) -> alt.Chart:
    """Commits along the x axis, each one's ratio to the good end with its 95% interval, coloured by verdict."""
    frame = pd.DataFrame(rows)
    base = alt.Chart(frame).encode(x=alt.X("build:O", title="commit (build number)"))
    points = base.mark_point(filled=True, size=120).encode(
        y=alt.Y("ratio:Q", title=f"{metric} ÷ the good end", scale=alt.Scale(zero=False)),
        color=alt.Color("verdict:N", scale=VERDICT_COLORS),
        tooltip=[
            "build",
            "commit",
            "subject",
            "verdict",
            alt.Tooltip("ratio:Q", format=".3f"),
            "ci_low",
            "ci_high",
            "p",
            "processes",
        ],  # fmt: skip
    )
    bars = base.mark_rule().encode(y="ci_low:Q", y2="ci_high:Q")
    one = alt.Chart(frame).mark_rule(strokeDash=[4, 3], color="#888").encode(y=alt.datum(1.0))  # the good end
    return (bars + points + one).properties(height=280)
