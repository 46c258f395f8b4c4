"""The coordinator's side of Celery: send jobs by task name (it never imports worker code), and look
into Redis to see which jobs still have a message waiting (for the reconciler)."""

from __future__ import annotations

import base64
import json
import os
import socket
import time
import uuid
from functools import lru_cache

import redis
from celery import Celery
from kombu import Exchange, Queue

from siliconbench.contract.queues import TASK_RUN_JOB, celery_settings


@lru_cache(maxsize=4)
def producer(broker_url: str) -> Celery:
    app = Celery("siliconbench-coordinator")
    app.conf.update(celery_settings(broker_url))
    return app


def task_id(job_id: str, dispatch: int | str) -> str:
    """One message id per (job, dispatch): a re-enqueue is a new message, the claim makes it idempotent."""
    return f"{job_id}.{dispatch}"


# Messages per LPUSH; a pipeline of these goes out in one round trip.
_PUSH_BATCH = 1000


@lru_cache(maxsize=4)
def _redis(broker_url: str):
    return redis.Redis.from_url(broker_url)


_declared: set[tuple[str, str]] = set()


def _declare(broker_url: str, queues: set[str]) -> None:
    """Declare each queue once per process, the way Celery's publish does (kombu's binding keys in Redis)."""
    todo = [q for q in queues if (broker_url, q) not in _declared]
    if not todo:
        return
    with producer(broker_url).connection_for_write() as conn:
        channel = conn.default_channel
        for q in todo:
            Queue(q, Exchange(q), routing_key=q).bind(channel).declare()  # as Celery names them
            _declared.add((broker_url, q))


def task_message(job_id: str, queue: str, tid: str, *, origin: str, reply_to: str) -> bytes:
    """The Redis list entry Celery 5.7's send_task(TASK_RUN_JOB, args=[job_id], ...) writes: a protocol-2
    task message (JSON, base64 body) in kombu 5.7's Redis transport envelope. Built here because Celery's
    own path (routing, signature options, kombu Message objects) costs most of the time of an enqueue."""
    body = base64.b64encode(json.dumps([[job_id], {}, _EMBED]).encode()).decode()
    return json.dumps(
        {
            "body": body,
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {
                "lang": "py",
                "task": TASK_RUN_JOB,
                "id": tid,
                "shadow": None,
                "eta": None,
                "expires": None,
                "group": None,
                "group_index": None,
                "retries": 0,
                "timelimit": [None, None],
                "root_id": tid,
                "parent_id": None,
                "argsrepr": job_id,
                "kwargsrepr": "",
                "origin": origin,
                "ignore_result": None,
                "replaced_task_nesting": 0,
                "stamped_headers": None,
                "stamps": {},
            },
            "properties": {
                "correlation_id": tid,
                "reply_to": reply_to,
                "argsrepr": job_id,
                "kwargsrepr": "",
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": queue},
                "priority": 0,
                "body_encoding": "base64",
                "delivery_tag": str(uuid.uuid4()),
            },
        }
    ).encode()


_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def enqueue(broker_url: str, items: list[tuple[str, str, int | str]]) -> None:
    """Send (job id, queue, dispatch number) messages over one connection, in order.

    The message carries only the job id: PostgreSQL holds the spec and its state, and the worker's
    claim reads both from there, so a stale or forged message cannot change what runs.

    The messages are exactly what Celery's send_task would write (task_message; the worker takes them as
    any Celery message: JSON, acks_late), pushed with multi-value LPUSHes in a Redis pipeline: one round
    trip per _PUSH_BATCH * many messages instead of kombu's per-message publish. Order within a queue is
    kept (a worker pops from the other end).
    """
    if not items:
        return

    app = producer(broker_url)
    _declare(broker_url, {q for _, q, _ in items})
    origin, reply_to = f"gen{os.getpid()}@{socket.gethostname()}", app.thread_oid
    pipe = _redis(broker_url).pipeline(transaction=False)
    run_queue, run = None, []

    def flush_run():
        if run:
            pipe.lpush(run_queue, *run)
            run.clear()

    for n, (job_id, queue, dispatch) in enumerate(items, 1):
        if queue != run_queue or len(run) >= _PUSH_BATCH:
            flush_run()
            run_queue = queue
        run.append(task_message(job_id, queue, task_id(job_id, dispatch), origin=origin, reply_to=reply_to))
        if n % (_PUSH_BATCH * 10) == 0:
            flush_run()
            pipe.execute()
    flush_run()
    pipe.execute()


def waiting_job_ids(broker_url: str, queues: list[str], reserved_within_s: float | None = None) -> set[str]:
    """Job ids that have a message in a Redis queue or in the unacked set (reserved by a worker).

    With ``reserved_within_s``, only reservations that recent count: kombu keeps a message a worker took in
    ``unacked`` until it is acked, and one taken by a worker killed before its claim stays there for the whole
    visibility timeout (hours). Its time of reservation is in ``unacked_index`` (kombu's QoS.append).
    """
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
    if reserved_within_s is None:
        reserved = r.hvals("unacked")
    else:
        recent = r.zrangebyscore("unacked_index", time.time() - reserved_within_s, "+inf")
        reserved = [raw for raw in (r.hmget("unacked", recent) if recent else []) if raw is not None]
    for raw in reserved:
        add(raw)
    return found


def purge_job_messages(broker_url: str, queues: list[str], job_ids: set[str]) -> int:
    """Remove waiting messages of cancelled jobs; a message that slips through is refused at claim."""
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


def send_task(broker_url: str, task_name: str, payload: dict, queue: str, *, task_id: str | None = None) -> str:
    """Send one task whose only argument is a JSON object (e.g. TASK_PREPARE_ENV to ``host.<name>``); its id.

    Celery's own publish (not enqueue's raw LPUSH): these are rare, and the JSON round trip checked here is the
    one the worker will make (JSON only, a pickle is refused).
    """
    if not isinstance(payload, dict):
        raise TypeError(f"a task's payload is one JSON object, not {type(payload).__name__}")
    json.dumps(payload, allow_nan=False)  # refuse now what the worker could not decode
    _declare(broker_url, {queue})
    tid = task_id or f"{task_name}.{uuid.uuid4().hex}"
    producer(broker_url).send_task(task_name, args=[payload], queue=queue, routing_key=queue, task_id=tid)
    return tid
