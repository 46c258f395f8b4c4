"""The coordinator's own Celery app: Celery beat sends ``TASK_WATCH_TICK`` every ``watch_tick_s`` to
``SCHEDULER_QUEUE``; the task is a thin shell over ``siliconbench.coordinator.watch.scheduler.tick``.

``start`` (``siliconbench scheduler``) runs both in one process: the beat as a thread (Celery's
``EmbeddedService(thread=True)``) and a solo-pool worker consuming the scheduler queue only. One process, so
the PID it was started with stops all of it; ``worker -B`` would fork the beat into a child that outlives a
kill -9 of its parent and goes on sending ticks. Macs never consume this queue. A tick is acknowledged on
receipt and expires after one period: a lost or stale tick is replaced by the next one, never redelivered
hours later. The beat's schedule file lives under the data dir, one per process (two schedulers on one host
must not share a shelve file), and carries nothing that matters: when a watch is due is in the database.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

from celery import Celery, signals
from celery.beat import EmbeddedService

from siliconbench.contract.queues import SCHEDULER_QUEUE, TASK_WATCH_TICK, celery_settings
from siliconbench.contract.settings import data_dir, env_setting

from siliconbench.coordinator.watch import scheduler

log = logging.getLogger("siliconbench.scheduler")
app = Celery("siliconbench-coordinator")
_beat = None


def configure(broker_url: str, tick_s: float) -> None:
    app.conf.update(
        celery_settings(broker_url),
        task_default_queue=SCHEDULER_QUEUE,
        task_routes={TASK_WATCH_TICK: {"queue": SCHEDULER_QUEUE}},
        beat_schedule={
            "watch-tick": {
                "task": TASK_WATCH_TICK,
                "schedule": float(tick_s),
                "options": {"queue": SCHEDULER_QUEUE, "expires": float(tick_s)},
            }
        },
    )


if os.environ.get("SILICONBENCH_BROKER_URL"):  # a worker process started by `siliconbench scheduler`
    configure(os.environ["SILICONBENCH_BROKER_URL"], env_setting("watch_tick_s"))


def checker() -> str:
    """Who runs the tick, as the watch_checks rows record it."""
    return f"{socket.gethostname()} pid {os.getpid()}"


def _required(var: str) -> str:
    value = os.environ.get(var)
    if not value:
        raise SystemExit(f"error: {var} is not set (siliconbench scheduler sets it from --broker/--database)")
    return value


@app.task(name=TASK_WATCH_TICK, acks_late=False, ignore_result=True)
def watch_tick_task(*_args) -> dict:
    """Validate nothing (a tick has no arguments), call the plain function, return what it did."""
    return scheduler.tick(
        _required("SILICONBENCH_DATABASE_URL"), _required("SILICONBENCH_BROKER_URL"), checker=checker()
    )


def schedule_file(given: Path | None = None) -> Path:
    path = given or data_dir() / "scheduler" / f"beat-{socket.gethostname()}-{os.getpid()}"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@signals.worker_shutdown.connect
def _stop_beat(sender=None, **_):
    if _beat is not None:
        _beat.stop()


def start(tick_s: float, schedule: Path | None = None) -> None:
    """Beat (a thread) and the scheduler queue's worker in this process; blocks until stopped."""
    global _beat
    broker = _required("SILICONBENCH_BROKER_URL")
    os.environ["SILICONBENCH_WATCH_TICK_S"] = repr(float(tick_s))
    configure(broker, tick_s)
    path = schedule_file(schedule)
    _beat = EmbeddedService(app, thread=True, schedule_filename=str(path))  # max_interval 1 s when threaded
    _beat.start()
    log.info("scheduler %s: a tick every %g s on %s (beat schedule %s)", checker(), tick_s, SCHEDULER_QUEUE, path)
    try:
        app.worker_main(
            [
                "worker",
                "--pool",
                "solo",
                "--concurrency",
                "1",
                "-Q",
                SCHEDULER_QUEUE,
                "-n",
                f"scheduler-{os.getpid()}@%h",
                "--without-gossip",
                "--without-mingle",
                "--loglevel",
                env_setting("log_level"),
            ]
        )
    finally:
        if schedule is None:  # the default file is this process's own: shelve's file(s) removed
            for leftover in path.parent.glob(path.name + "*"):
                leftover.unlink(missing_ok=True)
