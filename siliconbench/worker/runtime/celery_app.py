"""The worker's Celery app: thin task shells over siliconbench.worker.runtime.task.handle_job (a job) and siliconbench.worker.runtime.prepare_env.prepare_env
(a campaign's engine environment), plus lifecycle hooks.

Started by `siliconbench worker`, which puts its settings in the environment first. The solo pool
runs one job at a time in the worker process itself; the benchmark still runs in its own child
process, so a crashing engine costs a failed result, never the worker.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from celery import Celery, signals
from celery.exceptions import InvalidTaskError
from celery.worker.strategy import default

from siliconbench.contract.queues import MAX_ATTEMPTS, TASK_NOOP, TASK_PREPARE_ENV, TASK_RUN_JOB, celery_settings
from siliconbench.contract.settings import data_dir, env_setting, load_settings

from siliconbench.storage.broker import enqueue
from siliconbench.storage.database import as_application, hold_no_idle_connections
from siliconbench.storage.outages import call_through
from siliconbench.worker.measure import roofline
from siliconbench.worker.runtime.outages import DATABASE, quiet_celery_reconnects
from siliconbench.worker.runtime.prepare_env import prepare_env
from siliconbench.worker.runtime.registration import Heartbeat, mark_offline, register
from siliconbench.worker.runtime.spool import Spool
from siliconbench.worker.runtime.task import WorkerContext, handle_job

log = logging.getLogger("siliconbench.worker")


def _required(var: str) -> str:
    value = os.environ.get(var)
    if not value:
        raise SystemExit(f"error: {var} is not set (siliconbench worker sets it from --broker/--database/--name)")
    return value


app = Celery("siliconbench-worker")
# kombu's Redis transport, but a queue item it cannot decode is parked, not fatal (siliconbench/worker/runtime/redis_transport.py).
# No remote control: its pidbox is a broadcast to every worker (a connection each, celery #4994) and nothing of
# ours sends one; together with no gossip, mingle or events (start), an idle worker holds few Redis clients and sends
# nothing whose cost grows with the fleet (benchmarks/fleet_scale.py).
WORKER_TRANSPORT = {
    "broker_transport": "siliconbench.worker.runtime.redis_transport:Transport",
    "worker_enable_remote_control": False,
}
# Configured from the environment `siliconbench worker` prepared; importing this module alone needs nothing.
if os.environ.get("SILICONBENCH_BROKER_URL"):
    app.conf.update(celery_settings(os.environ["SILICONBENCH_BROKER_URL"]), **WORKER_TRANSPORT)

_ctx: WorkerContext | None = None
_heartbeat: Heartbeat | None = None


def context() -> WorkerContext:
    global _ctx
    if _ctx is None:
        name = _required("SILICONBENCH_WORKER_NAME")
        url = as_application(_required("SILICONBENCH_DATABASE_URL"), name)
        models_dir = Path(_required("SILICONBENCH_MODELS_DIR")).expanduser()
        spool_dir = Path(os.environ.get("SILICONBENCH_SPOOL_DIR") or data_dir() / "spool" / name)
        _ctx = WorkerContext(
            name=name,
            database_url=url,
            models_dir=models_dir,
            spool=Spool(spool_dir),
            hostname=name,
            durable_after_s=load_settings().durable_after_s,
        )
    return _ctx


def guarded_strategy(task, app, consumer, **kwargs):
    """Celery's default strategy, but a body that is not (args, kwargs, embed) is refused, not fatal.

    Celery 5.7 lets the ValueError of such a message escape and the whole worker dies; turning it into
    InvalidTaskError makes Celery log it and reject that one message (tests/fleet/test_fleet.py).
    """
    handler = default(task, app, consumer, **kwargs)

    def guarded(message, body, ack, reject, callbacks, **kw):
        try:
            return handler(message, body, ack, reject, callbacks, **kw)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise InvalidTaskError(f"malformed job message {message.headers.get('id')!r}: {exc}") from exc

    return guarded


@app.task(
    name=TASK_RUN_JOB,
    bind=True,
    max_retries=MAX_ATTEMPTS - 1,
    acks_late=True,
    Strategy="siliconbench.worker.runtime.celery_app:guarded_strategy",
)
def run_job_task(self, job_id):
    """Validate, call the plain function, return (the thin shell)."""
    ctx = context()
    queue = (self.request.delivery_info or {}).get("routing_key")

    def requeue(jid: str) -> None:
        enqueue(app.conf.broker_url, [(jid, queue, f"c{time.time_ns()}")])

    ctx.requeue = requeue if queue else None
    return handle_job(job_id, ctx)


@app.task(name=TASK_NOOP, acks_late=True)
def noop_task(*_args):
    """A raw Celery no-op: the baseline of benchmarks/plumbing.py (no claim, no database)."""
    return None


@app.task(name=TASK_PREPARE_ENV, acks_late=True, Strategy="siliconbench.worker.runtime.celery_app:guarded_strategy")
def prepare_env_task(payload):
    """Make a campaign candidate's engine environment here and report it (siliconbench.worker.runtime.prepare_env; thin shell)."""
    return prepare_env(context(), payload)


@signals.worker_ready.connect
def _on_ready(sender=None, **_):
    global _heartbeat
    ctx = context()
    probe = roofline.probed_gbs()  # a quiet figure of the last day is reused: a restart does not make it wrong
    if probe.get("busy"):
        log.info(
            "memory bandwidth probe: %.1f GB/s, taken while the machine was busy: not kept, tried again at a "
            "job in %d s at the earliest",
            probe["measured_gbs"],
            roofline.BUSY_RETRY_S,
        )
    elif probe:
        log.info("memory bandwidth probe: %.1f GB/s", probe["measured_gbs"])
    else:
        log.info("memory bandwidth probe: not taken, the machine was busy at the last one")
    _heartbeat = Heartbeat(ctx.database_url, ctx.name, spool=ctx.spool, ctx=ctx)
    _heartbeat.start()
    log.info("worker %s ready", ctx.name)


@signals.worker_shutdown.connect
def _on_shutdown(sender=None, **_):
    ctx = context()
    if _heartbeat is not None:
        _heartbeat.stopped.set()
    try:
        mark_offline(ctx.database_url, ctx.name)
    except Exception as exc:
        log.warning("could not mark %s offline: %s", ctx.name, exc)


def start(argv_extra: list[str] | None = None) -> None:
    """Register the host, then run the Celery worker on its queues (blocks until stopped)."""
    app.conf.update(celery_settings(_required("SILICONBENCH_BROKER_URL")), **WORKER_TRANSPORT)
    hold_no_idle_connections()  # one connection a worker, its held one: each Mac costs PostgreSQL one
    ctx = context()
    # The database may be away as the worker starts (a cut, a restart): wait it out, one line each way.
    queues = call_through(lambda: register(ctx.database_url, ctx.name, ctx.models_dir), DATABASE, max_backoff_s=30.0)
    # Extra queues to consume, e.g. the plumbing benchmark's (SILICONBENCH_WORKER_EXTRA_QUEUES=a,b).
    queues += [q for q in env_setting("worker_extra_queues").split(",") if q]
    log.info("consuming %s", ", ".join(queues))
    quiet_celery_reconnects()  # a broker outage: one line when it starts, one when it ends
    app.worker_main(
        [
            "worker",
            "--pool",
            "solo",
            "--concurrency",
            "1",
            "-Q",
            ",".join(queues),
            "-n",
            f"{ctx.name}@%h",
            "--loglevel",
            env_setting("log_level"),
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",  # Celery's own worker heartbeats are events nobody here reads (ours are rows)
            *(argv_extra or []),
        ]
    )
