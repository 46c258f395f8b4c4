"""A campaign's first state, *preparing*: every target host makes the engine environments the campaign needs.

A host needs an environment for each side whose version it does not already run (its advertised engines in the
hosts table: its own interpreter's version plus its ``env add`` environments). Usually that is the candidate,
but the baseline may be missing too (a new worker, or one whose environment was removed). For llama.cpp's tags the environment is a
build: the task carries the checkout, the tag and the build options (or the tag's release archive) instead of a
requirement, and the worker builds it (``siliconbench.worker.runtime.prepare_env``). The prepare task
carries one version and ``campaign_hosts`` holds one row per (campaign, host), so the sides are made **one
after the other**, candidate first: the coordinator writes the row *pending* and sends the first missing
version; when the worker reports *ready* (it refreshes its advertised engines before it says so), the next
tick sees what is still missing, writes the row *pending* again and sends the next. ``verdicts["hosts"][host]
["sent"]`` records each version sent, so a version is never sent twice and a ready report whose version did
not become visible is that host's error instead of a loop. A host that needs nothing gets a *ready* row at
once (env_name None, packages {}). A *failed* report, or no report within ``PREPARE_TIMEOUT_S``, is that
host's error for the campaign; the campaign goes on with the hosts that are ready.
"""

from __future__ import annotations

import copy
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from siliconbench.contract.queues import TASK_PREPARE_ENV, host_queue
from siliconbench.contract.settings import Settings, load_settings
from siliconbench.contract.watch_spec import LLAMA_CPP

from siliconbench.coordinator.watch import llama_tags, package_index
from siliconbench.storage.broker import send_task
from siliconbench.storage.campaign_hosts import env_reports, report_env
from siliconbench.storage.tables import Host, utcnow
from siliconbench.storage.watch_tables import Campaign

# A pending host that says nothing for this long (worker gone, message lost) is failed for this campaign.
PREPARE_TIMEOUT_S = 3600.0
PYPI = str(Settings.model_fields["package_index"].default).rstrip("/")


def versions_on(host: Host | None, engine: str) -> list[str]:
    """The versions of ``engine`` a host advertises ("0.32.2, 0.31.3": its own first, then its environments')."""
    for e in (host.engines or []) if host is not None else []:
        if e.get("name") == engine:
            return [v.strip() for v in str(e.get("version") or "").split(",") if v.strip()]
    return []


def missing(host: Host | None, c: Campaign) -> list[str]:
    """The campaign's versions the host cannot run yet, candidate first."""
    have = versions_on(host, c.engine)
    return [v for v in dict.fromkeys((c.candidate, c.baseline)) if v not in have]


def index_fields(doc: dict) -> dict:
    """pip's find_links / index_url for the index the watch saw the version on: its own (a folder of wheels or a
    simple-index URL), else SILICONBENCH_PACKAGE_INDEX; PyPI itself is left to the worker's pip configuration
    (a mirror it is set up with stays in use)."""
    index = doc.get("index") or load_settings().package_index
    if index.rstrip("/") == PYPI:
        return {"find_links": None, "index_url": None}
    return {"find_links": package_index.find_links_for(index), "index_url": package_index.index_url_for(index)}


def build_fields(llama: dict, ref: str) -> dict:
    """What a worker needs to make llama.cpp ``ref``: from the checkout (built there, once per commit and
    options), or the tag's release archive."""
    if llama.get("archives"):
        return {"archive": llama_tags.archive_for(llama["archives"], ref) or f"{llama['archives']}/llama-{ref}-bin"}
    return {
        "source": llama["source"],
        "ref": ref,
        "fetch": bool(llama.get("fetch", True)),
        "cmake_flags": list(llama.get("cmake_flags") or []),
        "tools": list(llama.get("tools") or []),
    }


def payload(c: Campaign, version: str, doc: dict) -> dict:
    if c.package == LLAMA_CPP:
        return {"campaign_id": c.id, "llama_cpp": build_fields(doc.get("llama_cpp") or {}, version)}
    return {"campaign_id": c.id, "requirement": f"{c.package}=={version}", "extra": [], **index_fields(doc)}


def prepare(session: Session, broker_url: str, c: Campaign, doc: dict) -> tuple[list[str], dict[str, str]] | None:
    """One step for every target host; None while some host has not reported, else (ready hosts, {host: why
    it failed}). Sends at most one prepare task per host and step."""
    rows = env_reports(session, c.id)
    hosts = {h.name: h for h in session.scalars(select(Host).where(Host.name.in_(list(c.hosts or []))))}
    # A copy: SQLAlchemy writes a JSON column only when the new value differs from the loaded one.
    book = copy.deepcopy((c.verdicts or {}).get("hosts") or {})
    stale = utcnow() - timedelta(seconds=PREPARE_TIMEOUT_S)
    waiting = False
    for name in c.hosts or []:
        row, need = rows.get(name), missing(hosts.get(name), c)
        entry = book.setdefault(name, {"sent": []})
        sent = entry.setdefault("sent", [])
        if hosts.get(name) is None:
            report_env(session, c.id, name, status="failed", error=f"no registered worker named {name}")
        elif row is None and not need:
            report_env(session, c.id, name, status="ready")  # it runs both versions already: nothing to make
        elif (row is None or row["status"] == "ready") and need and need[0] not in sent:
            report_env(session, c.id, name, status="pending")
            send_task(broker_url, TASK_PREPARE_ENV, payload(c, need[0], doc), host_queue(name))
            sent.append(need[0])
            waiting = True
        elif row is not None and row["status"] == "ready" and need:
            report_env(
                session,
                c.id,
                name,
                status="failed",
                error=(
                    f"the worker reported {c.package} {need[0]} ready but does not advertise it (its engines: "
                    f"{', '.join(versions_on(hosts.get(name), c.engine)) or 'none'}); restart it and run the watch again"
                ),
            )
        elif row is not None and row["status"] == "pending":
            if row["reported_at"] is not None and row["reported_at"] < stale:
                report_env(
                    session,
                    c.id,
                    name,
                    status="failed",
                    error=(
                        f"no report for {PREPARE_TIMEOUT_S:.0f} s after the prepare task was sent (worker offline?)"
                    ),
                )
            else:
                waiting = True
    c.verdicts = {**(c.verdicts or {}), "hosts": book}
    if waiting:
        return None
    rows = env_reports(session, c.id)
    ready = [h for h in c.hosts or [] if rows.get(h, {}).get("status") == "ready"]
    failed = {h: rows[h]["error"] or "failed" for h in c.hosts or [] if rows.get(h, {}).get("status") == "failed"}
    for h in c.hosts or []:
        book[h].update(
            status=rows.get(h, {}).get("status"), error=failed.get(h), env_name=rows.get(h, {}).get("env_name")
        )
    c.verdicts = {**(c.verdicts or {}), "hosts": book}
    return ready, failed
