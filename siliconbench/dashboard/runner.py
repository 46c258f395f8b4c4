"""Sweeps the dashboard runs on this machine when no broker is configured (as `siliconbench run` does).

One at a time, in a background thread of the dashboard's server process, so the page stays live and
the user can navigate away; two sweeps at once on one machine would disturb each other's timings.
Cancel marks the queued jobs cancelled (``siliconbench.coordinator.fleet.sweeps.cancel``) and stops after the running job.
A database outage pauses the sweep: each write waits (siliconbench.storage.outages, one log line each way) for up to
DB_PATIENCE_S; past that the sweep stops, and its unfinished jobs are failed with the reason once the
database answers again. The runner itself never dies of it: the next sweep runs.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.spec import SweepSpec

from siliconbench.coordinator.fleet import sweeps as fleet
from siliconbench.embedded import recover as recovery, run as embedded
from siliconbench.storage import sweep_store
from siliconbench.storage.database import session_scope
from siliconbench.storage.outages import Outage, call_through, first_line, is_outage
from siliconbench.worker.envs.venvs import interpreters

STARTUP_WAIT_S = 30  # until run_sweep has stored the sweep, so the list shows it at once
DB_PATIENCE_S = 900.0  # how long one write waits for the database before the sweep is given up
OUTAGE = Outage("dashboard runner", logging.getLogger("siliconbench.dashboard"))


class _Cancelled(Exception):
    pass


@dataclass
class Run:
    sweep_id: str
    n_jobs: int
    cancel: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    done: int = 0
    current: str | None = None  # label of the running job
    error: str | None = None

    @property
    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


_lock = threading.Lock()
_runs: dict[str, Run] = {}


def active() -> Run | None:
    with _lock:
        return next((r for r in _runs.values() if r.alive), None)


def get(sweep_id: str) -> Run | None:
    return _runs.get(sweep_id)


def _exists(url: str, sweep_id: str) -> bool:
    try:
        with session_scope(url) as s:
            sweep_store.sweep_progress(s, sweep_id)
        return True
    except UserError:
        return False


def start(spec: SweepSpec, jobs: list[JobSpec], *, database_url: str, models_dir: Path) -> Run:
    """Start the sweep in the background; UserError if one is running or the sweep id is taken."""
    sweep_id = jobs[0].sweep_id
    with _lock:
        busy = next((r for r in _runs.values() if r.alive), None)
        if busy:
            raise UserError(
                "sweep",
                f"sweep {busy.sweep_id!r} is running on this machine ({busy.done} of "
                f"{busy.n_jobs} jobs done); wait for it or cancel it: two sweeps at once would "
                "disturb each other's timings.",
            )
        if _exists(database_url, sweep_id):
            raise UserError("sweep", f"sweep {sweep_id!r} exists already; preview again for a new sweep id.")
        run = _runs[sweep_id] = Run(sweep_id, len(jobs))

    def on_event(job: JobSpec, event: dict) -> None:
        run.current = job.label()

    def on_done(job: JobSpec, result) -> None:
        run.done += 1
        if run.cancel.is_set():
            raise _Cancelled  # the job just finished is stored; the rest stay cancelled

    def target() -> None:
        try:
            embedded.run_sweep(
                spec,
                jobs,
                database_url=database_url,
                models_dir=models_dir,
                on_event=on_event,
                on_done=on_done,
                through=_through,
            )
        except _Cancelled:
            pass
        except Exception as exc:
            if is_outage(exc):  # past DB_PATIENCE_S: give the sweep up, recorded once the database is back
                run.error = (
                    f"stopped: the database was unreachable for more than {DB_PATIENCE_S:.0f} s ({first_line(exc)})"
                )
                call_through(lambda: _fail_unfinished(database_url, sweep_id, run.error), OUTAGE)  # waits for it
            else:  # shown on the Sweeps page; the thread must not die silently
                run.error = f"{type(exc).__name__}: {exc}"
        finally:
            run.current = None
            try:
                with session_scope(database_url) as s:
                    sweep_store.refresh_sweep_status(s, sweep_id)
            except Exception:
                pass  # the sweep was never stored (its error is recorded above)

    run.thread = threading.Thread(target=target, name=f"sweep-{sweep_id}", daemon=True)
    run.thread.start()
    deadline = time.monotonic() + STARTUP_WAIT_S
    while run.alive and not _exists(database_url, sweep_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    return run


def _through(fn):
    """One write of a sweep, waiting out a database outage for up to DB_PATIENCE_S."""
    return call_through(fn, OUTAGE, patience_s=DB_PATIENCE_S)


def _fail_unfinished(database_url: str, sweep_id: str, reason: str) -> None:
    with session_scope(database_url) as s:
        try:
            recovery.fail_unfinished(s, sweep_id, reason)
        except UserError:
            pass  # the outage came before the sweep was stored: nothing to fail


def recover(database_url: str, models_dir: Path) -> list:
    """At start: embedded sweeps of this host whose process stopped (a dashboard restart) get their
    on_interrupt; the ``rerun`` ones run again here in the background, one after another."""
    found = recovery.recover(database_url)
    again = [r for r in found if r.policy == "rerun" and r.jobs]
    if again:

        def target() -> None:
            for r in again:
                try:
                    embedded.run_jobs(
                        r.sweep_id,
                        r.jobs,
                        interpreters(r.jobs),
                        database_url=database_url,
                        models_dir=models_dir,
                        through=_through,
                    )
                except Exception as exc:  # a rerun that cannot start is visible, not silent
                    _runs[r.sweep_id].error = f"{type(exc).__name__}: {exc}"

        thread = threading.Thread(target=target, name="sweep-recovery", daemon=True)
        with _lock:  # one thread for them all: a new sweep waits for it, as for any running one
            for r in again:
                _runs[r.sweep_id] = Run(r.sweep_id, len(r.jobs), thread=thread)
        thread.start()
    return found


def cancel(database_url: str, sweep_id: str, broker_url: str | None = None) -> int:
    """Cancel the sweep's queued jobs (and their broker messages); an embedded run stops after its running
    job. Returns how many jobs were cancelled."""
    run = _runs.get(sweep_id)
    if run is not None:
        run.cancel.set()
    with session_scope(database_url) as s:
        return fleet.cancel(s, sweep_id, broker_url=broker_url)
