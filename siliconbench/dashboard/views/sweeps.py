"""Sweeps: submit one (form or YAML), see what it expands to before anything is enqueued, watch progress."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from siliconbench.contract.engines import ENGINE_NAMES
from siliconbench.contract.errors import UserError
from siliconbench.contract.spec import COMPARE_PROCESSES
from siliconbench.contract.workloads import notices

from siliconbench.dashboard import access, data, runner, sweep_form as sf

ss = st.session_state
st.title("Sweeps")

with data.user_errors():
    settings = data.settings()
    url = data.database_url()
    hosts = data.hosts(url) if settings.broker_url else []
fleet_mode = bool(settings.broker_url)
st.caption(
    "Fleet mode: jobs go to the workers through the broker."
    if fleet_mode
    else "No broker configured (SILICONBENCH_BROKER_URL): a submitted sweep runs here, one job at a time, "
    "in fresh child processes, as `siliconbench run` does."
)
model_names, quant_names = sf.choices(settings, hosts)
if not model_names:
    st.warning(
        "No models to offer: "
        + (
            "no worker has registered any."
            if fleet_mode
            else f"the models folder {settings.resolved_models_dir} holds none (run `siliconbench models make-tiny`, "
            "or set SILICONBENCH_MODELS_DIR)."
        )
    )

for key, value in {
    "sw_name": "sweep",
    "sw_models": model_names[:1],
    "sw_engines": list(ENGINE_NAMES),
    "sw_quants": ["full"],
    "sw_prompt_tokens": "512",
    "sw_gen_tokens": "128",
    "sw_depth": "0",
    "sw_reps": 5,
    "sw_procs": 1,
    "sw_warmup": 1,
    "sw_hosts": [],
    "sw_placement": "any",
    "sw_yaml": "",
    "sw_on_interrupt": "fail",
}.items():
    ss.setdefault(key, value)


def _set_preview(make_spec) -> None:
    ss.sw_errors, ss.sw_preview = {}, None
    try:
        ss.sw_preview = sf.preview(make_spec(), settings, url)
    except UserError as exc:
        ss.sw_errors = {exc.field: str(exc)}


def _preview_form() -> None:
    values = {n: ss[f"sw_{n}"] for n in sf.LENGTHS} | {
        "name": ss.sw_name,
        "models": ss.sw_models,
        "engines": ss.sw_engines,
        "quantizations": ss.sw_quants,
        "repetitions": ss.sw_reps,
        "processes": ss.sw_procs,
        "warmup": ss.sw_warmup,
        "hosts": ss.sw_hosts if fleet_mode else [],
        "placement": ss.sw_placement if fleet_mode else None,
        "on_interrupt": None if fleet_mode else ss.sw_on_interrupt,
    }
    ss.sw_source = "form"
    _set_preview(lambda: sf.parse_sweep(sf.data_from_form(values)))


def _preview_yaml() -> None:
    upload = ss.get("sw_upload")
    text = upload.getvalue().decode("utf-8", "replace") if upload is not None else ss.sw_yaml
    ss.sw_source = "yaml"
    _set_preview(lambda: sf.spec_from_yaml(text))


def _submit() -> None:
    if not access.may_write():  # logged out since the button was drawn
        ss.sw_errors = {"submit": "Log in again to submit this sweep."}
        return
    try:
        sid = sf.submit(ss.sw_preview, settings, url)
    except UserError as exc:
        ss.sw_errors = {"submit": str(exc)}
        return
    ss.sw_flash = f"Sweep {sid} submitted: {len(ss.sw_preview['jobs'])} jobs."
    ss.sw_preview, ss.sw_errors = None, {}


def error_at(field: str) -> None:
    """The pending error of ``field``, right under it."""
    for f, msg in ss.get("sw_errors", {}).items():
        target = "submit" if f == "submit" else "yaml" if ss.get("sw_source") == "yaml" else sf.form_field(f)
        if target == field:
            st.error(msg, icon="⚠️")


if access.may_write():  # no form, preview or submit button to a session that may not write
    form_tab, yaml_tab = st.tabs(["Form", "YAML"])
    with form_tab, st.form("sweep_form", border=False):
        error_at("general")
        st.text_input("Name", key="sw_name", help="Letters, digits, . _ -")
        error_at("name")
        c1, c2, c3 = st.columns(3)
        with c1:
            st.multiselect("Models", model_names, key="sw_models")
            error_at("models")
        with c2:
            st.multiselect("Engines", list(ENGINE_NAMES), key="sw_engines")
            error_at("engines")
        with c3:
            st.multiselect(
                "Quantizations", quant_names, key="sw_quants", help="A level (full, q8, q4) or an exact name"
            )
            error_at("quantizations")
        c1, c2, c3, c4, c5, c6 = st.columns(6)
        lengths = (("prompt_tokens", "Prompt lengths"), ("gen_tokens", "Generated tokens"), ("depth", "Depths"))
        for col, (name, label) in zip((c1, c2, c3), lengths, strict=False):
            with col:
                st.text_input(label, key=f"sw_{name}", help="Comma-separated token counts")
                error_at(name)
        with c4:
            st.number_input("Repetitions", min_value=1, step=1, key="sw_reps")
            error_at("repetitions")
        with c5:
            st.number_input(
                "Processes",
                min_value=1,
                step=1,
                key="sw_procs",
                help=f"Fresh processes per configuration. compare counts processes, not repetitions, as "
                f"samples: {COMPARE_PROCESSES} a side resolves a 5% change",
            )
            error_at("processes")
        with c6:
            st.number_input("Warmup runs", min_value=0, step=1, key="sw_warmup")
            error_at("warmup")
        c1, c2 = st.columns(2)
        with c1:
            st.multiselect("Hosts (empty: all)", [h["name"] for h in hosts], key="sw_hosts", disabled=not fleet_mode)
            error_at("hosts")
        with c2:
            st.radio(
                "Placement",
                ["any", "each"],
                key="sw_placement",
                horizontal=True,
                disabled=not fleet_mode,
                help="any: once, on any fitting host; each: on every selected host",
            )
            error_at("placement")
        st.radio(
            "If the dashboard stops mid-sweep",
            ["fail", "rerun"],
            key="sw_on_interrupt",
            horizontal=True,
            disabled=fleet_mode,
            help="At its next start, the unfinished jobs are failed with that reason, or run "
            "again (embedded sweeps only: the fleet's workers hand a lost job on by themselves)",
        )
        st.form_submit_button("Preview", type="primary", on_click=_preview_form)

    with yaml_tab:
        st.text_area(
            "Sweep YAML", key="sw_yaml", height=220, placeholder="name: my-sweep\nmodels: [tiny-llama-30m]\n..."
        )
        st.file_uploader("…or upload a YAML file", type=["yaml", "yml"], key="sw_upload")
        error_at("yaml")
        st.button("Preview YAML", on_click=_preview_yaml, key="sw_preview_yaml")

    if flash := ss.pop("sw_flash", None):
        st.success(flash)

    p = ss.get("sw_preview")
    if p:
        st.subheader(f"Preview of {p['spec'].name}: nothing is enqueued yet")
        est = p["estimate"]
        c1, c2, c3 = st.columns(3)
        c1.metric("Jobs", len(p["jobs"]))
        c2.metric("Hosts / queues", len(p["assignments"]))
        known = est["jobs"] - est["unknown_jobs"]
        value = sf.duration(est["total_s"]) if known else "unknown"
        if known and est["unknown_jobs"]:
            value = f"over {value}"  # the jobs without history are not in the sum
        c3.metric(
            "Estimated duration",
            value,
            help="From earlier results of the same configurations (else the same "
            f"model and engine, scaled by tokens); {est['unknown_jobs']} job(s) have no history.",
        )
        anywhere = "any fitting host" if p["mode"] == "fleet" else "this machine"
        st.dataframe(
            pd.DataFrame(
                [
                    {"#": j.index, "job": j.label(), "host": j.host or anywhere, "repetitions": j.repetitions}
                    for j in p["jobs"]
                ]
            ),
            hide_index=True,
            key="preview_jobs",
        )
        st.dataframe(
            pd.DataFrame([{"host / queue": k, "jobs": n} for k, n in p["assignments"].items()]),
            hide_index=True,
            key="preview_hosts",
        )
        for u in p["unplaceable"]:
            st.error(f"Fits nowhere: {u['job']} ({'; '.join(sorted(set(u['reasons'])))})")
        for text in notices(p["jobs"]):
            st.warning(text)
        if p["mode"] == "embedded" and (p["spec"].hosts != "all" or p["spec"].placement != "any"):
            st.warning("hosts and placement apply to the fleet only; this sweep runs on this machine.")
        verb = "Enqueue" if p["mode"] == "fleet" else "Run on this machine:"
        st.button(
            f"{verb} {len(p['jobs'])} jobs",
            type="primary",
            on_click=_submit,
            key="sw_submit",
            disabled=bool(p["unplaceable"]),
        )
    error_at("submit")
else:
    access.explain("submit a sweep")

st.subheader("Sweeps")
live = runner.active() is not None or bool(data.active_sweeps(url))


@st.fragment(run_every=2 if live else None)
def sweep_list() -> None:
    rows = data.sweeps(url)
    if not rows:
        st.info("No sweeps yet.")
        return
    table = [
        {
            "sweep": r["id"],
            "status": r["status"],
            "progress": (r["jobs"]["ok"] + r["jobs"]["failed"] + r["jobs"]["cancelled"]) / max(r["n_jobs"], 1),
            **r["jobs"],
            "jobs": r["n_jobs"],
            "created": r["created_at"],
        }
        for r in rows
    ]
    st.dataframe(
        pd.DataFrame(table),
        hide_index=True,
        key="sweep_table",
        column_config={
            "progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0, format="percent")
        },
    )
    run = runner.active()
    if run:
        st.caption(f"Running here: {run.current or 'starting'} ({run.done} of {run.n_jobs} jobs done)")
    for r in (runner.get(x["id"]) for x in rows):
        if r is not None and r.error:
            st.error(f"Sweep {r.sweep_id} stopped: {r.error}")
    active = [r["id"] for r in rows if r["status"] in ("queued", "running")]
    if active and access.may_write():  # a fragment rerun re-asks
        c1, c2 = st.columns([3, 1])
        target = c1.selectbox("Sweep to cancel", active, key="sw_cancel_target", label_visibility="collapsed")
        if c2.button("Cancel sweep", key="sw_cancel"):
            n = runner.cancel(url, target, broker_url=settings.broker_url)
            st.toast(f"Cancelled {n} queued job(s) of {target}; a running job finishes and is recorded.")
    if live and not active and run is None:
        st.rerun()  # the last sweep finished: a full run stops the polling


sweep_list()
