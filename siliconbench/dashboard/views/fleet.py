"""Fleet: every registered worker, online or not, from its heartbeats (siliconbench.coordinator.fleet.sweeps.list_hosts), and the
hosts whose series disagree with their SKU peers' (siliconbench.coordinator.fleet.peers: suspect hosts, their results marked)."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import streamlit as st

from siliconbench.contract.queues import ONLINE_S

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


@st.fragment(run_every=5)  # heartbeats arrive every few seconds; the table follows
def hosts_table() -> None:
    hosts = data.hosts(url)
    if not hosts:
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
    suspect = {r["host"] for r in data.suspects(url)}
    online = sum(h["online"] for h in hosts)
    st.caption(f"{online} of {len(hosts)} online (a heartbeat within {ONLINE_S} s).")
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "worker": h["name"],
                    "status": "online" if h["online"] else "offline",
                    "suspect": "⚠ suspect" if h["name"] in suspect else "",
                    "host": h["hostname"],
                    "sku": h["sku"],
                    "chip": h["chip"],
                    "memory GiB": round(h["memory_bytes"] / 2**30) if h["memory_bytes"] else None,
                    "os": h["os"],
                    "engines": ", ".join(f"{e} {v}" for e, v in sorted(h["engines"].items())),
                    "models": h["forms"],
                    "current job": " ".join(filter(None, [h["current_job_id"], h["activity"]])),
                    "last heartbeat": ago(h["last_heartbeat"]),
                    "jobs done": h["jobs_done"],
                    "jobs failed": h["jobs_failed"],
                }
                for h in hosts
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
