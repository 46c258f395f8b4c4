"""The fleet as the coordinator sees it: hosts from heartbeats, sweep preview, submit, status, cancel.

The CLI and the dashboard both call these; neither has a second code path.
"""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

from sqlalchemy import func, literal_column, select, update
from sqlalchemy.orm import Session

from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import ModelCatalog, ModelManifest
from siliconbench.contract.queues import ONLINE_S
from siliconbench.contract.spec import SweepSpec

from siliconbench.coordinator.fleet.placement import HostView, Placement, place, select_hosts
from siliconbench.storage import broker, jobstate, sweep_store
from siliconbench.storage.database import session_scope
from siliconbench.storage.fleet_models import list_models
from siliconbench.storage.tables import Host, Job, Sweep, utcnow

# The coordinator has no models folder of its own: artifact paths are checked against this root.
VIRTUAL_MODELS_DIR = Path("/siliconbench-models")


def list_hosts(session: Session) -> list[dict]:
    """Every registered host as a plain dict (name, chip, engines {name: version}, models [names], online ...)."""
    return [h.as_dict() for h in host_views(session)]


def is_online(online: bool | None, last_heartbeat, now) -> bool:
    """Online: marked so and a heartbeat within ONLINE_S (a crash sends no goodbye)."""
    return bool(online and last_heartbeat is not None and now - last_heartbeat < timedelta(seconds=ONLINE_S))


def host_views(session: Session, names: list[str] | None = None) -> list[HostView]:
    """Every registered host (or those of ``names``, one page of a large fleet: siliconbench.coordinator.fleet.roster);
    online means a heartbeat within ONLINE_S (a crash sends no goodbye)."""
    now = utcnow()
    tallies: dict[str, dict[str, int]] = defaultdict(dict)
    counted = select(Job.worker, Job.status, func.count()).group_by(Job.worker, Job.status)
    hosts = select(Host).order_by(Host.name)
    if names is not None:
        counted, hosts = counted.where(Job.worker.in_(names)), hosts.where(Host.name.in_(names))
    for worker, status, n in session.execute(counted):
        if worker:
            tallies[worker][status] = n
    out = []
    for h in session.scalars(hosts):
        out.append(
            HostView(
                name=h.name,
                hostname=h.hostname,
                chip=h.chip,
                memory_bytes=h.memory_bytes,
                os=h.os,
                details=(h.info or {}).get("host_details") or {},
                engines={e["name"]: e["version"] for e in h.engines or []},
                models={m["name"]: m for m in h.models or []},
                online=is_online(h.online, h.last_heartbeat, now),
                last_heartbeat=h.last_heartbeat,
                current_job_id=h.current_job_id,
                activity=h.activity,
                jobs_done=tallies[h.name].get("ok", 0),
                jobs_failed=tallies[h.name].get("failed", 0),
            )
        )
    return out


def fleet_catalog(hosts: list[HostView], published: list[dict] = ()) -> ModelCatalog:
    """The models the fleet has: the manifests hosts registered (the first host's copy of each model, with the forms,
    by digest, that only other hosts hold added to it), then the models the coordinator published itself
    (siliconbench.storage.fleet_models: every form fetchable, so any worker fetches what it lacks)."""
    cat = ModelCatalog(VIRTUAL_MODELS_DIR, where="registered worker")
    manifests = [m for h in hosts for m in h.models.values()] + list(published)
    for m in manifests:
        got = ModelManifest.model_validate(m)
        have = cat.models.setdefault(got.name, got)
        if have is not got:
            known = {a.sha256 for a in have.artifacts}
            have.artifacts += [a for a in got.artifacts if a.sha256 not in known]
    return cat


def plan(session: Session, spec: SweepSpec, sweep_id: str | None = None) -> Placement:
    """Expand and place; UserError if the spec is bad, targets no live worker, or a job fits nowhere."""
    hosts = host_views(session)
    if not any(h.online for h in hosts):
        raise UserError(
            "hosts",
            "the sweep targets no live worker; start one on each Mac with "
            "`siliconbench worker --broker redis://HOST:6379/0 --database postgresql://USER@HOST/siliconbench`.",
        )
    catalog = fleet_catalog(hosts, list_models(session))
    # Level `full` picks its weight dtype by the OS of the workers that will run the jobs (F16/f16 on Macs).
    targets = [h for h in select_hosts(spec, hosts) if h.online and h.os]
    if targets:
        catalog.platforms = {h.os for h in targets}
    jobs = expand(spec, catalog, sweep_id=sweep_id)
    return place(spec, jobs, hosts, catalog.models)


def preview(session: Session, spec: SweepSpec) -> dict:
    p = plan(session, spec)
    return {"jobs": p.jobs, "assignments": p.assignments(), "unplaceable": p.unplaceable}


def submit(spec: SweepSpec, *, database_url: str, broker_url: str, sweep_id: str | None = None) -> str:
    """Store and enqueue a sweep; returns its id (see submit_sweep for the placement too)."""
    return submit_sweep(spec, database_url=database_url, broker_url=broker_url, sweep_id=sweep_id)[0]


def submit_sweep(
    spec: SweepSpec, *, database_url: str, broker_url: str, sweep_id: str | None = None
) -> tuple[str, Placement]:
    """Store the sweep and its placed jobs, then enqueue them; nothing is stored if any job fits nowhere."""
    sid = sweep_id or f"{spec.name}-{time.strftime('%Y%m%dT%H%M%S')}"
    with session_scope(database_url) as s:
        p = plan(s, spec, sweep_id=sid)
        if p.unplaceable:
            lines = "; ".join(f"{u['job']}: {', '.join(sorted(set(u['reasons'])))}" for u in p.unplaceable[:5])
            more = f" (and {len(p.unplaceable) - 5} more)" if len(p.unplaceable) > 5 else ""
            raise UserError("hosts", f"{len(p.unplaceable)} job(s) fit on no selected worker: {lines}{more}.")
        sweep_store.create_sweep(s, sid, spec, p.jobs)
        s.flush()
        jobstate.mark_enqueued(s, [j.job_id for j in p.jobs], p.queues)
    broker.enqueue(broker_url, [(j.job_id, p.queues[j.job_id], 0) for j in p.jobs])
    return sid, p


def submit_once(database_url: str, broker_url: str, spec: SweepSpec, sweep_id: str) -> bool:
    """Enqueue the sweep unless it exists (a step of the watch's that died before recording it); True if
    enqueued now."""
    with session_scope(database_url) as s:
        if s.get(Sweep, sweep_id) is not None:
            return False
    submit_sweep(spec, database_url=database_url, broker_url=broker_url, sweep_id=sweep_id)
    return True


def progress(session: Session, sweep_id: str | None = None) -> dict[str, dict[str, int]]:
    """Per host (worker that ran it, or the host it is pinned to, or 'any'): counts by job status."""
    host = func.coalesce(Job.worker, Job.target_host, literal_column("'any'")).label("host")
    q = select(host, Job.status, func.count())
    if sweep_id:
        q = q.where(Job.sweep_id == sweep_id)
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for name, status, n in session.execute(q.group_by(host, Job.status)):
        out[name][status] = n
    return dict(out)


def unfinished(session: Session, sweep_id: str) -> int:
    """The sweep's jobs still queued or running, on every host."""
    return sum(n.get("queued", 0) + n.get("running", 0) for n in progress(session, sweep_id).values())


def cancel(session: Session, sweep_id: str, broker_url: str | None = None) -> int:
    """Cancel what has not started; running jobs finish and are recorded."""
    if session.get(Sweep, sweep_id) is None:
        raise UserError("SWEEP", f"no sweep {sweep_id!r}.", [s["id"] for s in sweep_store.list_sweeps(session)][:20])
    rows = session.execute(select(Job.id, Job.queue).where(Job.sweep_id == sweep_id, Job.status == "queued")).all()
    session.execute(
        update(Job)
        .where(Job.sweep_id == sweep_id, Job.status == "queued")
        .values(status="cancelled", finished_at=utcnow(), error="cancelled before it started")
    )
    session.execute(update(Sweep).where(Sweep.id == sweep_id).values(status="cancelled"))
    if broker_url and rows:  # a message that slips through is refused at claim once this commits
        broker.purge_job_messages(broker_url, [q for _, q in rows if q], {j for j, _ in rows})
    return len(rows)
