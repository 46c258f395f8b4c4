"""Fleet: every registered worker, online or not, from its heartbeats (siliconbench.coordinator.fleet.sweeps.list_hosts), and the
hosts whose series disagree with their SKU peers' (siliconbench.coordinator.fleet.peers: suspect hosts, their results marked)."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import streamlit as st

from siliconbench.contract.queues import ONLINE_S

from siliconbench.coordinator.fleet import roster as fleet_roster
from siliconbench.dashboard import data

st.title("Fleet")

with data.user_errors():
    settings = data.settings()
    url = data.database_url()


def ago(t: datetime | None) -> str:
    if t is None:
        return "never"
    s = (datetime.now(UTC) - t).total_seconds()
    return f"{s:.0f} s ago" if s < 120 else f"{s / 60:.0f} min ago" if s < 7200 else f"{s / 3600:.1f} h ago"


@st.fragment(run_every=5)  # heartbeats arrive every few seconds; the tables follow
def hosts_table() -> None:
    # A fleet of hundreds: the summary by SKU and state reads a few columns of every host, the table one page.
    left, mid, right = st.columns([1, 2, 1])
    state = left.selectbox("state", ["all", *fleet_roster.STATES], key="fleet_state")
    sku_choice = mid.selectbox("SKU", ["all", *st.session_state.get("fleet_skus", [])], key="fleet_sku")
    page = right.number_input("page", min_value=1, value=1, step=1, key="fleet_page")
    r = data.roster(
        url,
        state=None if state == "all" else state,
        sku=None if sku_choice == "all" else sku_choice,
        page=int(page),
        per_page=fleet_roster.PER_PAGE,
    )
    st.session_state["fleet_skus"] = sorted(r.counts)
    if not r.counts:
        st.info(
            "No worker has registered yet."
            + (
                ""
                if settings.broker_url
                else " Without a broker (SILICONBENCH_BROKER_URL) sweeps run on this machine; start a worker on each "
                "Mac with `siliconbench worker` to build a fleet."
            )
        )
        return
    totals = r.state_totals()
    st.caption(
        f"{totals['online'] + totals['busy']} of {sum(totals.values())} online ({totals['busy']} running a job; "
        f"online: a heartbeat within {ONLINE_S} s)."
    )
    st.dataframe(
        pd.DataFrame(
            [{"sku": sku, **{k: counts[k] for k in fleet_roster.STATES}} for sku, counts in sorted(r.counts.items())]
        ),
        hide_index=True,
        width="stretch",
        key="fleet_summary",
    )
    if not r.total:
        st.info("No host matches these filters.")
        return
    suspect = {row["host"] for row in data.suspects(url)}
    st.caption(f"Page {r.page} of {r.pages}: {r.total} host(s) match, {fleet_roster.PER_PAGE} a page.")
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "worker": h.name,
                    "status": fleet_roster.state_of(h.online, h.current_job_id),
                    "suspect": "⚠ suspect" if h.name in suspect else "",
                    "host": h.hostname,
                    "sku": r.skus[h.name],
                    "chip": h.chip,
                    "memory GiB": round(h.memory_bytes / 2**30) if h.memory_bytes else None,
                    "os": h.os,
                    "engines": ", ".join(f"{e} {v}" for e, v in sorted(h.engines.items())),
                    "models": h.models_text(),
                    "current job": " ".join(filter(None, [h.current_job_id, h.activity_text()])),
                    "last heartbeat": ago(h.last_heartbeat),
                    "jobs done": h.jobs_done,
                    "jobs failed": h.jobs_failed,
                }
                for h in r.hosts
            ]
        ),
        hide_index=True,
        width="stretch",
        key="hosts_table",
    )


def ci(r: dict) -> str:
    return f"{r['ci_low']:.3f}–{r['ci_high']:.3f}" if r["ci_low"] is not None and r["ci_high"] is not None else "—"


def suspects_table() -> None:
    rows = data.suspects(url)
    if not rows:
        return
    st.subheader("Suspect hosts")
    st.caption(
        "Slower than the other hosts of their SKU (chip, CPU and GPU cores, memory, OS) beyond their noise, "
        "same version and configuration: throttled, busy or misconfigured. Their results in these series are "
        "marked; a campaign's verdict leaves them out."
    )
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "suspect host": r["host"],
                    "sku": r["sku"],
                    "series": r["series"],
                    "metric": r["metric"],
                    "ratio vs peers": round(r["ratio"], 3) if r["ratio"] is not None else None,
                    "95% CI": ci(r),
                    "peers": ", ".join(r["peers"] or []),
                    "campaign": r["campaign_id"],
                    "results marked": len(r["job_ids"] or []),
                    "since": ago(r["created_at"]),
                    "reason": r["reason"],
                }
                for r in rows
            ]
        ),
        hide_index=True,
        width="stretch",
        key="suspects_table",
    )


hosts_table()
suspects_table()
