"""Compare: llama.cpp against MLX, filtered; a table in the shape people publish, and charts."""

from __future__ import annotations

import streamlit as st

from siliconbench.contract.metrics import HEADLINE, METRICS

from siliconbench.coordinator.reads.queries import MAX_SERIES, Filters, left_out_note
from siliconbench.dashboard import charts, data, tables

st.title("Compare")

with data.user_errors():
    url = data.database_url()
    version = data.version(url)
    opts = data.filter_options(url, version)

if not version[0]:
    st.info("No results yet. Submit a sweep on the Sweeps page; its results show here as they arrive.")
    st.page_link("views/sweeps.py", label="Go to Sweeps")
    st.stop()

FILTERS = [
    ("sweeps", "Sweep"),
    ("hosts", "Host"),
    ("chips", "Chip"),
    ("models", "Model"),
    ("quants", "Quantization"),
    ("engines", "Engine"),
    ("engine_versions", "Engine version"),
    ("workloads", "Workload"),
    ("n_prompt", "Prompt tokens"),
    ("n_gen", "Generated tokens"),
    ("n_depth", "Depth (tokens)"),
    ("mac_models", "Mac model"),
    ("gpu_cores", "GPU cores"),
]
with st.sidebar:
    st.header("Filters")
    st.caption("Empty means any.")
    chosen = {}
    for name, label in FILTERS:
        # The newest sweep by default: what a user just ran is what they want to see first.
        default = opts["sweeps"][:1] if name == "sweeps" else []
        chosen[name] = tuple(st.multiselect(label, opts.get(name, []), default=default, key=f"f_{name}"))
    include = st.checkbox(
        "Include disturbed results",
        value=False,
        key="f_disturbed",
        help="Jobs that began or ended with the host thermally throttled (the thermal gate, "
        "siliconbench/worker/measure/thermal.py), or during which other processes took real CPU (the busy "
        "gate, siliconbench/worker/measure/busy.py), are disturbed: left out by default, because they "
        "measure the machine's other work, not the engine.",
    )
    filters = Filters(**chosen, include_disturbed=include)
    left_out = data.disturbed_results(url, version, filters)
    hidden = left_out_note(left_out, include)
    if hidden:
        st.caption(hidden)


def charts_for(rows: list[dict], frame, metric: str) -> None:
    bars_tab, dist_tab, scale_tab = st.tabs(["Bars", "Distribution", "Scaling"])
    with bars_tab:
        st.altair_chart(charts.bars(frame, metric), width="stretch", key="bars")
    with dist_tab:
        configs = list(dict.fromkeys(r["config"] for r in rows))[:12]  # one panel per configuration
        ids = tuple(r["identity_hash"] for r in rows if r["config"] in configs)
        samples = tables.sample_frame(rows, data.raw_samples(url, version, filters, metric, ids))
        if len(configs) < len({r["config"] for r in rows}):
            st.caption("The first 12 configurations; narrow the filters for the others.")
        if samples.empty:
            st.info("No raw samples for this metric.")
        else:
            st.altair_chart(charts.distribution(samples, metric), key="distribution")
    with scale_tab:
        x = st.radio(
            "Against",
            ["n_prompt", "n_depth"],
            horizontal=True,
            key="scale_x",
            format_func={"n_prompt": "prompt length", "n_depth": "depth"}.get,
        )
        if frame[x].nunique() < 2:
            st.info(
                f"Every shown series has the same {'prompt length' if x == 'n_prompt' else 'depth'}; "
                "sweep several lengths to see how throughput scales."
            )
        st.altair_chart(charts.scaling(tables.chart_frame(rows, metric, x), metric, x), width="stretch", key="scaling")


rows, total = data.series(url, version, filters)
if not rows:
    st.warning("No successful result matches these filters." + (f" {hidden}" if hidden else ""))
else:
    rows = tables.label_series(rows)
    shown = f"the {len(rows)} most recently measured of {total}" if total > len(rows) else f"{total}"
    st.caption(
        f"{shown} series; a series is one identity (configuration + environment): different "
        "identities are never averaged together. Mean ± sample stddev over measured repetitions."
        + (f" At most {MAX_SERIES} are shown: narrow the filters to see the rest." if total > len(rows) else "")
        + (f" {hidden}" if hidden else "")
    )

    st.subheader("Side by side")
    st.dataframe(
        tables.compare_table(rows),
        hide_index=True,
        width="stretch",
        key="compare_table",
        column_config={"detail": st.column_config.LinkColumn("detail", display_text="open")},
    )
    ratios = tables.ratio_table(rows)
    if not ratios.empty:
        st.subheader("llama.cpp ÷ MLX")
        st.caption("Ratio of means; above 1 means llama.cpp is faster (tok/s) or slower / larger (TTFT, memory).")
        st.dataframe(ratios, hide_index=True, width="stretch", key="ratio_table")

    metric = st.radio(
        "Metric",
        HEADLINE,
        horizontal=True,
        key="metric",
        format_func=lambda m: f"{tables.PUBLISHED[m]} ({METRICS[m].better} is better)",
    )
    frame = tables.chart_frame(rows, metric)
    if frame.empty:
        st.info(f"None of these series measured {metric}.")
    else:
        charts_for(rows, frame, metric)

failed = data.failed_results(url, version, filters)
if failed:
    with st.expander(f"{len(failed)} failed result(s) match these filters (not plotted)"):
        st.dataframe(
            [{**f, "detail": f"/result?job={f['job_id']}"} for f in failed],
            hide_index=True,
            column_config={"detail": st.column_config.LinkColumn("detail", display_text="open")},
            key="failed_table",
        )
