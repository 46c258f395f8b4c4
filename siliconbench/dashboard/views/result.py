"""Result detail: one job's raw samples, environment, engine options, stability warnings, or its error."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from siliconbench.contract.metrics import HEADLINE, METRICS

from siliconbench.dashboard import data

st.title("Result detail")

with data.user_errors():
    url = data.database_url()
    version = data.version(url)

recent = data.recent_results(url, version, st.toggle("Failed only", key="failed_only"))
labels = {
    r["job_id"]: f"{r['status']} · {r['engine']} {r['model']} {r['quant']} p{r['n_prompt']} g{r['n_gen']} "
    f"d{r['n_depth']} · {r['hostname'] or '?'}{' · ⚠ disturbed' if r['disturbed'] else ''} · "
    f"{r['job_id']}"
    for r in recent
}
wanted = st.query_params.get("job")
options = ([wanted] if wanted and wanted not in labels else []) + list(labels)
if not options:
    st.info("No results yet.")
    st.stop()
job_id = st.selectbox(
    "Result",
    options,
    index=options.index(wanted) if wanted in options else 0,
    format_func=lambda j: labels.get(j, j),
    key="result_pick",
)
st.query_params["job"] = job_id  # a link to this page shows this result
d = data.result_detail(url, version, job_id)
if d is None:
    st.error(f"No stored result for job {job_id!r} (unknown, or not finished yet).")
    st.stop()

rec = d["record"]
st.subheader(
    f"{rec['engine']} {rec['engine_version'] or ''} · {rec['model']} {rec['quant']} · "
    f"p{rec['n_prompt']} g{rec['n_gen']} d{rec['n_depth']}"
)
st.caption(
    f"sweep {rec['sweep_id']} · job {rec['job_id']} · host {rec['host']['hostname']} · worker "
    f"{rec['worker'] or '?'} · stored {rec['created_at']} · identity {rec['identity_hash']}"
)

if rec["status"] != "ok":
    st.error(f"**{rec['status']}**: {rec['error']}")
    st.caption("stderr (tail)")
    st.code(rec["stderr_tail"] or "(no stderr captured)", language=None)
for w in rec["unstable"]:
    st.warning(f"Unstable: {w}")

# Every metric the job measured (its workload's own included), summarized by siliconbench.contract.aggregate.
summaries = rec.get("metrics") or ({m: rec[m] for m in HEADLINE} | rec["engine_counters"])
summary = [
    {
        "metric": m,
        "unit": METRICS[m].unit if m in METRICS else "",
        "better": METRICS[m].better if m in METRICS else "",
        "n": len(s["samples"]),
        **{k: s[k] for k in ("mean", "median", "stddev", "min", "max")},
    }
    for m, s in summaries.items()
    if s
]
if summary:
    st.dataframe(pd.DataFrame(summary), hide_index=True, key="summary_table")
c1, c2, c3, c4 = st.columns(4)
c1.metric("Load", f"{rec['load_s']:.3f} s" if rec["load_s"] is not None else "—")
c2.metric("Peak memory (RSS)", f"{rec['peak_memory_bytes'] / 2**20:,.0f} MiB" if rec["peak_memory_bytes"] else "—")
c3.metric("Wall time", f"{d['wall_s']:.2f} s" if d["wall_s"] is not None else "—")
heat = (d["extra"] or {}).get("thermal") or {}
c4.metric(
    "Thermal",
    "throttled" if heat.get("throttled") else (heat.get("end") or {}).get("thermal_state", "not recorded"),
    help="Thermal state and power at job start and end (siliconbench/worker/measure/thermal.py); a throttled result is left "
    "out of Compare unless asked for.",
)
if heat.get("throttled"):
    st.warning(f"The host was throttled when this job began or ended: {heat.get('start')} → {heat.get('end')}")
load = (d["extra"] or {}).get("busy") or {}
if load.get("contended"):
    during = load.get("during") or {}
    st.warning(
        f"Contended: other processes took real CPU while this job ran ({'; '.join(load.get('why') or [])}; "
        f"others {during.get('others_cpu_pct')}% of the cores, steal {during.get('steal_pct')}%). Like a "
        "throttled result, it is left out of Compare and regression verdicts unless asked for (siliconbench/worker/measure/busy.py)."
    )
elif load:
    st.caption(
        f"Quiet host: others used {(load.get('during') or {}).get('others_cpu_pct')}% of the cores during the "
        f"job (gate {load.get('mode')}, waited {load.get('waited_s')} s before it)."
    )

if len(d["attempts"]) > 1:
    st.subheader("Attempts")
    st.caption(
        "How each attempt ended: a crash counts against the job's attempts; a lost worker (interrupted) "
        "does not, up to its own larger bound."
    )
    st.dataframe(pd.DataFrame(d["attempts"]), hide_index=True, key="attempts_table")

st.subheader("Raw samples")
if d["samples"]:
    st.caption("Every repetition as measured; warmup repetitions are kept, flagged, and excluded from aggregates.")
    st.dataframe(pd.DataFrame(d["samples"]), hide_index=True, key="samples_table")
else:
    st.info("This job recorded no samples.")

c1, c2 = st.columns(2)
with c1:
    st.subheader("Engine options")
    st.json({"job": d["engine_options"], "as run": (rec["environment"] or {}).get("engine_options", {})})
with c2:
    st.subheader("Environment")
    st.json(rec["environment"] or {}, expanded=1)
if d["extra"]:
    with st.expander("Engine facts"):
        st.json(d["extra"])
