"""Regressions: the findings (steps in series histories), each series' history with its change points and
versions, and the button that confirms a finding with an interleaved A/B/A/B sweep on this host.

Above them, the regression watch: its watches and campaigns (siliconbench.coordinator.watch.watches, through siliconbench.dashboard.data), and
the campaign verdicts (siliconbench.coordinator.watch.messages) with their webhook delivery. Reads and writes only through
siliconbench.coordinator.history.regressions / siliconbench.coordinator.history.points / siliconbench.coordinator.watch.messages / siliconbench.coordinator.watch.watches / siliconbench.embedded.confirm.
"""

from __future__ import annotations

import platform

import altair as alt
import pandas as pd
import streamlit as st

from siliconbench.contract.metrics import HEADLINE, METRICS

from siliconbench.coordinator.history.compare import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT
from siliconbench.coordinator.history.load import load_points
from siliconbench.coordinator.history.regressions import (
    find_steps,
    get_finding,
    history_points,
    list_findings,
    save_findings,
)
from siliconbench.coordinator.reads.queries import Filters, left_out_note
from siliconbench.coordinator.watch.bisections import list_bisections
from siliconbench.coordinator.watch.messages import notifications
from siliconbench.dashboard import access, data
from siliconbench.dashboard.charts import bisection_chart, bisection_timeline
from siliconbench.embedded.confirm import DEFAULT_ROUNDS, start_background
from siliconbench.storage.database import session_scope

st.title("Regressions")
st.caption(
    "Steps found by change-point detection (ruptures PELT) in each series, ordered by engine version then "
    "time, kept only where the results either side, each process one sample (the median of its "
    "repetitions), pass a Mann-Whitney U test and move by at least the minimum effect: at least 4 processes a "
    "side. Confirm one before alarming: an interleaved A/B/A/B sweep on the same host."
)

with data.user_errors():
    url = data.database_url()


@st.cache_data(ttl=60, show_spinner=False, max_entries=8)
def _points(url: str, version: tuple, include_disturbed: bool):
    with session_scope(url) as s:
        return load_points(s, include_disturbed=include_disturbed)


def _scan(metrics: list[str], min_effect: float, alpha: float, include_disturbed: bool) -> int:
    with session_scope(url) as s:
        steps = find_steps(
            load_points(s, include_disturbed=include_disturbed),
            metrics=tuple(metrics),
            alpha=alpha,
            min_effect=min_effect,
        )
        save_findings(s, steps)
    return len(steps)


can_write = access.may_write()  # scanning records findings, confirming runs a sweep
include_disturbed = st.checkbox(
    "Include disturbed results",
    value=False,
    key="rg_disturbed",
    help="Results that ran throttled (thermal gate) or contended (busy gate) measure the "
    "machine's other work: histories and verdicts leave them out by default.",
)
hidden = left_out_note(data.disturbed_results(url, data.version(url), Filters()), include_disturbed)
if hidden:
    st.caption(hidden)
with st.expander("Scan the history", expanded=False):
    c1, c2, c3 = st.columns([3, 1, 1])
    metrics = c1.multiselect("Metrics", list(METRICS), default=list(HEADLINE), key="rg_metrics")
    min_effect = c2.number_input("Min effect", 0.0, 0.5, DEFAULT_MIN_EFFECT, 0.01, key="rg_min_effect")
    alpha = c3.number_input("Alpha", 0.001, 0.2, DEFAULT_ALPHA, 0.01, format="%.3f", key="rg_alpha")
    if not can_write:
        access.explain("record findings (the scan) or confirm one")
    elif st.button("Scan for change points", key="rg_scan"):
        with data.user_errors():
            n = _scan(metrics, min_effect, alpha, include_disturbed)
        st.success(f"{n} steps passed the test; new ones were recorded as findings.")


def bisection_cell(verdicts: dict) -> str:
    """A llama.cpp campaign's bisection: its id (drawn below), or why none was started."""
    b = (verdicts or {}).get("bisection") or {}
    return f"bisection {b['id']}" if b.get("id") else b.get("reason", "")


st.subheader("Watches and their campaigns")
with data.user_errors():
    watch_rows, campaign_rows = data.watch_campaigns(url)
if not watch_rows:
    st.caption("No watch yet: `siliconbench watch add examples/watch.yaml` follows new engine releases.")
else:
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "watch": w["name"],
                    "packages": ", ".join(w["packages"]),
                    "every": w["every"],
                    "hosts": str(w["hosts"]),
                    "last checked": w["last_checked_at"].strftime("%Y-%m-%d %H:%M")
                    if w["last_checked_at"]
                    else "never",
                    "campaigns": w["campaigns"],
                }
                for w in watch_rows
            ]
        ),
        hide_index=True,
        width="stretch",
        key="rg_watches",
    )
    if campaign_rows:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "campaign": c["id"],
                        "watch": c["watch"],
                        "status": c["status"],
                        "versions": f"{c['package']} {c['baseline']} → {c['candidate']}",
                        "hosts": ", ".join(c["hosts"]),
                        "verdicts": c["summary"],
                        "bisection": bisection_cell(c["verdicts"]),
                        "baseline": c["baseline_reason"] or "",
                        "error": c["error"] or "",
                    }
                    for c in campaign_rows
                ]
            ),
            hide_index=True,
            width="stretch",
            key="rg_campaigns",
        )
    else:
        st.caption(
            "No campaign yet: a watch's first look records the releases already out; the next release "
            "becomes a campaign."
        )

st.subheader("Campaign verdicts")
with data.user_errors(), session_scope(url) as s:
    sent = notifications(s)  # one query, not cached: a delivery's state moves without any new result
if not sent:
    st.caption("No campaign has reached a verdict yet (`siliconbench regressions --since 7d` lists them too).")
else:
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "when": (n["created_at"] or "")[:19],
                    "kind": n["kind"],
                    "campaign": n["campaign_id"],
                    "webhook": n["delivery"]
                    + (
                        f" after {n['attempts']} tries"
                        if n["delivery"] == "delivered"
                        else f", {n['attempts']} tries"
                        if n["delivery"] == "pending"
                        else ""
                    ),
                    "last error": n["last_error"] or "",
                    "message": n["message"],
                }
                for n in sent
            ]
        ),
        hide_index=True,
        width="stretch",
        key="rg_notifications",
    )
    st.caption(
        "Pending webhooks are retried with backoff (5 s doubling, at most an hour apart) until the "
        "receiver answers 2xx; none is dropped."
    )

st.subheader("Bisections")
with data.user_errors(), session_scope(url) as s:
    bisections = list_bisections(s)  # the fleet's (started by the watch) and this host's, from the one store
if not bisections:
    st.caption(
        "None yet: `siliconbench regressions bisect SWEEP.yaml --source DIR --good REF --bad REF` finds the "
        "llama.cpp commit that caused a regression here; a watch on llama.cpp's tags starts one on the fleet."
    )
else:
    pick = st.selectbox(
        "Bisection",
        range(len(bisections)),
        format_func=lambda i: (
            f"{bisections[i]['started_at']} · {bisections[i]['metric']} · {bisections[i]['good']['label']} → "
            f"{bisections[i]['bad']['label']} · {bisections[i]['outcome']}"
            + (f" · on {bisections[i]['host']}" if bisections[i].get("host") else "")
        ),
        key="rg_bisection",
    )
    b = bisections[pick]
    rows = bisection_timeline(b)
    st.altair_chart(bisection_chart(rows, b["metric"]), width="stretch")
    if b["outcome"] == "found":
        fb, eff = b["first_bad"], b["effect"] or {}
        st.markdown(
            f"**First bad commit**: `{fb['sha']}` (b{fb['number']}) {fb['subject']} — {b['metric']} ratio "
            f"{eff.get('ratio', 0):.3f}, 95% CI {eff.get('ci_low', 0):.3f}–{eff.get('ci_high', 0):.3f} "
            "(last good → first bad, re-measured)"
        )
    elif b["outcome"] == "ambiguous":
        names = ", ".join(f"`{c.get('sha', '')[:12]}`" for c in b["suspects"])
        st.markdown(f"**Ambiguous**: the first bad commit could be any of {names}.")
    else:
        st.markdown(f"**{b['outcome']}** between {b['good']['label']} and {b['bad']['label']}.")
    if b.get("reason"):
        st.caption(b["reason"])
    for note in b.get("notes") or []:
        st.caption(f"Note: {note}")
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="rg_bisection_steps")

st.subheader("Findings in series histories")
with data.user_errors(), session_scope(url) as s:
    findings = list_findings(s)

if not findings:
    st.info("No findings yet. Scan the history above, or run `siliconbench regressions`.")
    st.stop()

table = pd.DataFrame(
    [
        {
            "finding": f["id"],
            "status": f["status"],
            "verdict": f["verdict"],
            "series": f["series"],
            "metric": f["metric"],
            "ratio": f["ratio"],
            "p": f["p_value"],
            "what changed": f["changes"],
            "confirmation": (
                f"{f['confirm_result']['verdict']} (ratio {f['confirm_result']['ratio']:.3f})"
                if f["confirm_result"] and f["confirm_result"].get("ratio") is not None
                else ""
            ),
        }
        for f in findings
    ]
)
st.dataframe(table, hide_index=True, width="stretch", key="rg_findings")

ids = [f["id"] for f in findings]
chosen = st.selectbox(
    "Finding",
    ids,
    format_func=lambda i: next(
        f"#{f['id']} {f['verdict']} — {f['series']} {f['metric']}" for f in findings if f["id"] == i
    ),
    key="rg_finding",
)
f = next(x for x in findings if x["id"] == chosen)
metric = METRICS[f["metric"]]

with data.user_errors():
    hist = history_points(_points(url, data.version(url), include_disturbed), f["series_id"], f["metric"])
if hist:
    df = pd.DataFrame(hist)
    base = alt.Chart(df).encode(
        x=alt.X("index:Q", title="history (by version, then time)"),
        y=alt.Y(
            "value:Q", title=f"{metric.name} ({metric.unit}, {metric.better} is better)", scale=alt.Scale(zero=False)
        ),
        tooltip=["index", "value", "versions", "sweep", "source", "when", "job_id"],
    )
    chart = base.mark_line(point=True)
    steps = df[df["step"] != ""]
    if not steps.empty:
        rules = (
            alt.Chart(steps)
            .mark_rule(strokeDash=[4, 3], color="#d62728")
            .encode(x=alt.X("index:Q"), tooltip=["step", "changes", "versions"])
        )
        chart = chart + rules
    st.altair_chart(chart, width="stretch")
    st.caption("Dashed lines: steps that passed the test, with the components that changed there.")

c1, c2 = st.columns(2)
with c1:
    st.markdown(f"**What changed**: {f['changes']}")
    comp = f["comparison"] or {}
    if comp.get("ratio") is not None:
        st.markdown(
            f"**Found**: median {comp['baseline_median']:,.1f} → {comp['candidate_median']:,.1f} "
            f"({metric.unit}), ratio {comp['ratio']:.3f}"
            + (f", 95% CI {comp['ci_low']:.3f}–{comp['ci_high']:.3f}" if comp.get("ci_low") else "")
            + f", p {comp['p_value']:.2g}"
        )
with c2:
    r = f["confirm_result"]
    if r:
        st.markdown(
            f"**Confirmation** ({r['rounds']} rounds, sweep `{r['sweep_id']}`): {r['baseline']} → "
            f"{r['candidate']}: {r['verdict']}"
            + (f", ratio {r['ratio']:.3f}, p {r['p_value']:.2g}" if r.get("p_value") is not None else "")
        )
    here = platform.node()
    if f["status"] == "confirming":
        st.info("A confirmation sweep is running; reload to see its result.")
    elif f["host"] and f["host"] != here:
        st.caption(f"Measured on {f['host']}; only that host can confirm it (this is {here}).")
    elif not can_write:
        access.explain("confirm this finding")
    elif st.button(f"Confirm (A/B/A/B × {DEFAULT_ROUNDS} on this host)", key="rg_confirm"):
        with data.user_errors(), session_scope(url) as s:
            get_finding(s, chosen)
        pid = start_background(chosen)
        st.success(f"Confirmation started (process {pid}); its result is attached to finding {chosen}.")
