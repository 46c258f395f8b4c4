"""The coordinator's fleet verbs: `submit`, `status`, `cancel`, `workers`, `reconcile` (a Mac joins with `worker`:
worker.py)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from siliconbench.contract.spec import load_sweep
from siliconbench.contract.workloads import notices

from siliconbench.storage.database import session_scope
from siliconbench.storage.outages import run_forever

from .common import console, fleet_settings, user_errors


@user_errors
def submit(
    sweep: Path = typer.Argument(..., help="Sweep spec (YAML) with hosts: and placement:"),
    wait: bool = typer.Option(False, "--wait", help="Follow progress (and reconcile) until every job is final"),
    sweep_id: str = typer.Option(None, help="Pin the sweep id"),
) -> None:
    """Expand a sweep, check every job against the live workers, store it and enqueue it."""
    from siliconbench.coordinator.fleet.sweeps import submit_sweep  # verb-local

    s, broker = fleet_settings()
    spec = load_sweep(sweep)
    sid, placement = submit_sweep(spec, database_url=s.database_url, broker_url=broker, sweep_id=sweep_id)
    for text in notices(placement.jobs):
        console.print(f"[yellow]note:[/] {text}")
    t = Table(title=f"sweep {sid}: {len(placement.jobs)} jobs enqueued", title_justify="left")
    t.add_column("queue")
    t.add_column("jobs", justify="right")
    for q, n in sorted(placement.assignments().items()):
        t.add_row(q, str(n))
    console.print(t)
    if wait:
        _follow(s.database_url, broker, sid)


def _progress_table(database_url: str, sweep_id: str | None) -> tuple[Table, int]:
    from siliconbench.coordinator.fleet.sweeps import progress  # verb-local

    with session_scope(database_url) as ses:
        prog = progress(ses, sweep_id)
    t = Table(title=f"progress of {sweep_id or 'all sweeps'}", title_justify="left")
    statuses = ("queued", "running", "ok", "failed", "cancelled")
    t.add_column("host")
    for st in statuses:
        t.add_column("done" if st == "ok" else st, justify="right")
    pending = 0
    for host, counts in sorted(prog.items()):
        t.add_row(host, *(str(counts.get(st, 0)) for st in statuses))
        pending += counts.get("queued", 0) + counts.get("running", 0)
    return t, pending


def _follow(database_url: str, broker: str, sweep_id: str, every_s: float = 5.0) -> None:
    from siliconbench.coordinator.fleet.reconcile import reconcile  # verb-local
    from siliconbench.coordinator.reports.tables import print_sweep_table  # verb-local

    while True:
        reconcile(database_url, broker)
        table, pending = _progress_table(database_url, sweep_id)
        if not pending:
            console.print(table)
            break
        time.sleep(every_s)
    print_sweep_table(database_url, sweep_id, console=console)


@user_errors
def status(sweep: str = typer.Argument(None, help="Sweep id (default: all)")) -> None:
    """Progress per host: queued / running / done / failed."""
    s, _ = fleet_settings()
    console.print(_progress_table(s.database_url, sweep)[0])


@user_errors
def cancel(sweep: str = typer.Argument(..., help="Sweep id")) -> None:
    """Cancel every job of a sweep that has not started; running ones finish and are recorded."""
    from siliconbench.coordinator.fleet.sweeps import cancel as do_cancel  # verb-local

    s, broker = fleet_settings()
    with session_scope(s.database_url) as ses:
        n = do_cancel(ses, sweep, broker)
    console.print(f"cancelled {n} job(s) of {sweep}")


@user_errors
def workers(
    state: str = typer.Option(
        None, "--state", help="Only hosts in this state: online, busy (a job running) or offline"
    ),
    sku: str = typer.Option(None, "--sku", help="Only hosts of this SKU (as the summary names it)"),
    page: int = typer.Option(1, "--page", help="Which page of hosts, from 1"),
    per_page: int = typer.Option(50, "--per-page", help="Hosts a page"),
) -> None:
    """The fleet: hosts by SKU and state (online from heartbeats, busy with a job, offline), then one page of hosts:
    SKU (what `confirm --sku` takes), engines, the models each holds with their forms, current job (or the model
    it is fetching), tallies."""
    from siliconbench.coordinator.fleet.roster import STATES, roster, state_of  # verb-local

    s, _ = fleet_settings()
    with session_scope(s.database_url) as ses:
        r = roster(ses, state=state, sku=sku, page=page, per_page=per_page)
    totals = r.state_totals()
    summary = Table(
        title=f"{sum(totals.values())} worker(s): " + ", ".join(f"{totals[k]} {k}" for k in STATES),
        title_justify="left",
    )
    for c in ("sku", *STATES):
        summary.add_column(c, justify="left" if c == "sku" else "right")
    for name, counts in sorted(r.counts.items()):
        summary.add_row(escape(name), *(str(counts[k]) for k in STATES))
    console.print(summary)
    if not r.total:
        return
    t = Table(title=f"page {r.page} of {r.pages} ({r.total} host(s){_filtered(state, sku)})", title_justify="left")
    for c in ("name", "state", "sku", "engines", "models", "current job", "done", "failed", "last heartbeat"):
        t.add_column(c)
    for h in r.hosts:
        now = state_of(h.online, h.current_job_id)
        t.add_row(
            h.name,
            f"[{COLOUR[now]}]{now}[/]",
            escape(r.skus[h.name]),
            ", ".join(f"{e} {v}" for e, v in h.engines.items()),
            h.models_text(),
            " ".join(filter(None, [h.current_job_id, h.activity_text()])),
            str(h.jobs_done),
            str(h.jobs_failed),
            h.last_heartbeat.strftime("%Y-%m-%d %H:%M:%S") if h.last_heartbeat else "",
        )
    console.print(t)
    if r.page < r.pages:
        console.print(f"next: siliconbench workers --page {r.page + 1}" + _filtered(state, sku, as_options=True))


COLOUR = {"online": "green", "busy": "yellow", "offline": "red"}  # the roster's states


def _filtered(state: str | None, sku: str | None, as_options: bool = False) -> str:
    if as_options:
        return "".join([f" --state {state}" if state else "", f" --sku '{sku}'" if sku else ""])
    said = [f"state {state}" if state else "", f"SKU {sku}" if sku else ""]
    return "".join(f", {w}" for w in said if w)


@user_errors
def reconcile(
    loop: bool = typer.Option(False, "--loop", help="Keep reconciling every --every seconds"),
    every: float = typer.Option(10.0, "--every"),
) -> None:
    """Re-enqueue jobs whose worker died or whose message was lost; fail jobs out of attempts."""
    from siliconbench.coordinator.fleet.reconcile import reconcile as do_reconcile  # verb-local

    s, broker = fleet_settings(wait_for="reconcile" if loop else None)

    def once() -> None:
        counts = do_reconcile(s.database_url, broker)
        if any(counts.values()) or not loop:
            console.print(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in counts.items()))

    if not loop:
        return once()
    # A broker restart or a database cut is waited out (one line when it starts, one when it ends), never fatal.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    run_forever(once, every, name="reconcile", log=logging.getLogger("siliconbench.reconcile"))
