"""The coordinator's side of Celery: send jobs by task name (it never imports worker code), and look
into Redis to see which jobs still have a message waiting (for the reconciler)."""

from __future__ import annotations

import json
from functools import lru_cache

from celery import Celery

from siliconbench.queues import TASK_RUN_JOB, celery_settings


@lru_cache(maxsize=4)
def producer(broker_url: str) -> Celery:
    app = Celery("siliconbench-coordinator")
    app.conf.update(celery_settings(broker_url))
    return app


def task_id(job_id: str, dispatch: int | str) -> str:
    """One message id per (job, dispatch): a re-enqueue is a new message, the claim makes it idempotent."""
    return f"{job_id}.{dispatch}"


def enqueue(broker_url: str, items: list[tuple[str, str, int | str]]) -> None:
    """Send (job id, queue, dispatch number) messages over one connection, in order.

    The message carries only the job id: PostgreSQL holds the spec and its state, and the worker's
    claim reads both from there, so a stale or forged message cannot change what runs.
    """
    app = producer(broker_url)
    # kombu 5.7's publish batch pipelines the LPUSHes: one round trip per batch, not per message.
    with app.producer_or_acquire() as prod, prod.batch(max_size=500):
        for job_id, queue, n in items:
            app.send_task(TASK_RUN_JOB, args=[job_id], queue=queue, routing_key=queue, task_id=task_id(job_id, n),
                          producer=prod, argsrepr=job_id, kwargsrepr="")


def waiting_job_ids(broker_url: str, queues: list[str]) -> set[str]:
    """Job ids that have a message in a Redis queue or in the unacked set (reserved by a worker)."""
    import redis

    r = redis.Redis.from_url(broker_url)
    found: set[str] = set()

    def add(raw: bytes) -> None:
        try:
            msg = json.loads(raw)
        except (ValueError, TypeError):
            return
        if isinstance(msg, list):  # unacked entries are [message, exchange, routing_key]
            msg = msg[0]
        tid = (msg.get("headers") or {}).get("id", "")
        if tid:
            found.add(tid.rsplit(".", 1)[0])

    for q in set(queues):
        for raw in r.lrange(q, 0, -1):
            add(raw)
    for raw in r.hvals("unacked"):
        add(raw)
    return found


def purge_job_messages(broker_url: str, queues: list[str], job_ids: set[str]) -> int:
    """Remove waiting messages of cancelled jobs; a message that slips through is refused at claim."""
    import redis

    r = redis.Redis.from_url(broker_url)
    removed = 0
    for q in set(queues):
        for raw in r.lrange(q, 0, -1):
            try:
                tid = json.loads(raw)["headers"]["id"]
            except (ValueError, KeyError, TypeError):
                continue
            if tid.rsplit(".", 1)[0] in job_ids:
                removed += r.lrem(q, 1, raw)
    return removed
