"""Confirm a finding through the fleet: the same A/B/A/B confirmation as on one host, on chosen workers.

``submit_confirm`` plans the finding's confirmation sweep (``siliconbench.coordinator.confirm.plan``) with the two sides'
package versions, which each worker resolves with its own engine environments, pins it to the chosen hosts
(every host runs every job, in order, so each host's rounds are interleaved) and enqueues it
(``siliconbench.coordinator.fleet.sweeps.submit_sweep``); the finding is *confirming* meanwhile. ``wait_confirm`` follows its jobs
to the end; ``attach_confirm`` compares each host's sides and attaches the result: one host's comparison as on
one host, or with several hosts ``{"hosts": {name: comparison}, ...}``. The finding is *confirmed* when every
host with a verdict agrees with the finding's, *not_confirmed* otherwise. ``confirm_on_fleet`` does all three.

Hosts are named (``--host``) or chosen by SKU (``--sku``: every online worker of that SKU).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from sqlalchemy import select

from siliconbench.contract.errors import UserError
from siliconbench.contract.queues import ONLINE_S

from siliconbench.coordinator.confirm.plan import (
    DEFAULT_ROUNDS,
    check_confirmable,
    check_rounds,
    compare_sides,
    confirm_spec,
    fleet_confirm_status,
    identity_differences,
    same_sides,
    side_result,
    side_version,
)
from siliconbench.coordinator.fleet import sweeps as fleet
from siliconbench.coordinator.fleet.peers import sku_of
from siliconbench.coordinator.fleet.reconcile import reconcile
from siliconbench.coordinator.history.compare import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT
from siliconbench.coordinator.history.load import load_points
from siliconbench.coordinator.history.regressions import finding_dict, get_finding, set_status
from siliconbench.storage import result_store
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import Job, Sweep

Progress = Callable[[dict[str, int]], None]


def choose_hosts(session, hosts: list[str] | None = None, sku: str | None = None) -> list[str]:
    """The workers a confirmation runs on: the named ones (each registered and online), or every online
    worker of ``sku``; a UserError naming the option and the valid choices otherwise."""
    if bool(hosts) == bool(sku):
        raise UserError(
            "--host", "name the workers with --host (repeatable) or choose them with --sku, one of the two."
        )
    views = fleet.host_views(session)
    online = sorted(h.name for h in views if h.online)
    if sku:
        chosen = sorted(h.name for h in views if h.online and sku_of(h).casefold() == sku.strip().casefold())
        if not chosen:
            raise UserError(
                "--sku", f"no online worker has SKU {sku!r}.", sorted({sku_of(h) for h in views if h.online})
            )
        return chosen
    known = {h.name: h for h in views}
    for name in hosts:
        if name not in known:
            raise UserError("--host", f"no registered worker named {name!r}.", sorted(known))
        if not known[name].online:
            raise UserError(
                "--host",
                f"worker {name!r} is offline (no heartbeat in the last {ONLINE_S} s); start it or choose another.",
                online,
            )
    return list(dict.fromkeys(hosts))


def submit_confirm(
    database_url: str,
    broker_url: str,
    finding_id: int,
    hosts: list[str],
    *,
    rounds: int = DEFAULT_ROUNDS,
    repetitions: int | None = None,
) -> str:
    """Plan, check and enqueue the confirmation sweep on ``hosts``; its id. Nothing is enqueued on a UserError."""
    check_rounds(rounds)
    with session_scope(database_url) as s:
        hosts = choose_hosts(s, hosts)
        f = get_finding(s, finding_id)
        stored = result_store.load_stored(s, job_ids=[f.before_job_id])
        if not stored:
            raise UserError("FINDING", f"the result before the step ({f.before_job_id}) is no longer stored.")
        before = stored[0].job
        check_confirmable(f, before)
        base, cand = side_version(f.engine, f.before), side_version(f.engine, f.after)
        same_sides(f, base, cand)
        spec = confirm_spec(f, before, rounds=rounds, repetitions=repetitions, base=base, cand=cand, hosts=hosts)
        sweep_id = f"confirm-{finding_id}-{time.strftime('%Y%m%dT%H%M%S')}"
        planned = fleet.plan(s, spec, sweep_id=sweep_id)  # checked here, before anything is stored
        for job in planned.jobs[:1]:
            differ = identity_differences(before, job)
            if differ:
                raise UserError(
                    "FINDING",
                    f"the fleet would not rerun the finding's series: its jobs differ in "
                    f"{', '.join(differ)} (a worker's copy of {before.model} or the engine options "
                    "changed since).",
                )
    sweep_id, _ = fleet.submit_sweep(spec, database_url=database_url, broker_url=broker_url, sweep_id=sweep_id)
    with session_scope(database_url) as s:
        set_status(s, finding_id, "confirming", confirm_sweep_id=sweep_id)
    return sweep_id


def wait_confirm(
    database_url: str,
    sweep_id: str,
    *,
    broker_url: str | None = None,
    every_s: float = 2.0,
    timeout_s: float | None = None,
    on_progress: Progress | None = None,
) -> dict[str, int]:
    """Until no job of the sweep is queued or running (reconciling each time when ``broker_url`` is given, as
    `submit --wait` does); the final counts by status. ``on_progress`` sees each change of the counts."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    last = None
    while True:
        if broker_url:
            reconcile(database_url, broker_url)
        with session_scope(database_url) as s:
            counts = Counter()
            for per_host in fleet.progress(s, sweep_id).values():
                counts.update(per_host)
        counts = dict(counts)
        if counts != last and on_progress is not None:
            on_progress(counts)
        last = counts
        if not counts.get("queued") and not counts.get("running"):
            return counts
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"confirmation sweep {sweep_id} still has unfinished jobs after {timeout_s:.0f} s")
        time.sleep(every_s)


def attach_confirm(
    database_url: str,
    finding_id: int,
    sweep_id: str | None = None,
    *,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
) -> dict:
    """Compare each host's baseline and candidate in the confirmation sweep and attach it; the finding's dict."""
    with session_scope(database_url) as s:
        f = get_finding(s, finding_id)
        sweep_id = sweep_id or f.confirm_sweep_id
        sweep = s.get(Sweep, sweep_id) if sweep_id else None
        if sweep is None:
            raise UserError("FINDING", f"finding {finding_id} has no confirmation sweep {sweep_id or ''} to attach.")
        base, cand = sweep.spec["engine_versions"][f.engine]
        rounds = sweep.spec["processes"]
        host_of = dict(s.execute(select(Job.id, Job.target_host).where(Job.sweep_id == sweep_id)).all())
        ended_ok = load_points(s, sweep_id, include_disturbed=True)
        per_host = {}
        for host in sorted(set(host_of.values()), key=str):
            on_host = [p for p in ended_ok if host_of.get(p.job_id) == host]
            pts = [p for p in on_host if not p.disturbed]
            n_ok = len(on_host)
            comp = compare_sides(pts, base, cand, f.metric, alpha=alpha, min_effect=min_effect)
            n_jobs = sum(1 for h in host_of.values() if h == host)
            per_host[host] = side_result(
                comp, base=base, cand=cand, rounds=rounds, n_jobs=n_jobs, n_ok=n_ok, n_clean=len(pts), sweep_id=sweep_id
            ) | {"host": host}
        agree = [h for h, r in per_host.items() if r["verdict"] == f.verdict]
        status = fleet_confirm_status([r["verdict"] for r in per_host.values()], f.verdict)
        if len(per_host) == 1:
            result = next(iter(per_host.values()))
        else:
            verdicts = {r["verdict"] for r in per_host.values()}
            result = {
                "baseline": base,
                "candidate": cand,
                "rounds": rounds,
                "sweep_id": sweep_id,
                "verdict": verdicts.pop() if len(verdicts) == 1 else "mixed",
                "confirmed_hosts": agree,
                "failed_jobs": sum(r["failed_jobs"] for r in per_host.values()),
                "disturbed_jobs": sum(r["disturbed_jobs"] for r in per_host.values()),
                "hosts": per_host,
            }
        set_status(s, finding_id, status, confirm_sweep_id=sweep_id, confirm_result=result)
        return finding_dict(get_finding(s, finding_id))


def confirm_on_fleet(
    database_url: str,
    broker_url: str,
    finding_id: int,
    hosts: list[str],
    *,
    rounds: int = DEFAULT_ROUNDS,
    repetitions: int | None = None,
    wait: bool = True,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    timeout_s: float | None = None,
    on_progress: Progress | None = None,
) -> dict:
    """Submit the confirmation on ``hosts``; with ``wait``, follow it and attach its result. The finding's dict
    (with ``wait`` False: still *confirming*, its ``confirm_sweep_id`` set)."""
    sweep_id = submit_confirm(database_url, broker_url, finding_id, hosts, rounds=rounds, repetitions=repetitions)
    if wait:
        wait_confirm(database_url, sweep_id, broker_url=broker_url, timeout_s=timeout_s, on_progress=on_progress)
        return attach_confirm(database_url, finding_id, sweep_id, alpha=alpha, min_effect=min_effect)
    with session_scope(database_url) as s:
        return finding_dict(get_finding(s, finding_id))
