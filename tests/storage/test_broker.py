"""siliconbench.storage.broker builds Celery messages itself for speed: they must equal what Celery writes."""

from __future__ import annotations

import json

import redis

from siliconbench.contract.queues import TASK_RUN_JOB

from siliconbench.storage import broker
from siliconbench.worker.runtime.redis_transport import malformed

URL = "redis://127.0.0.1:6379/9"  # this module's own Redis database (flushed here)


def _strip(raw: bytes) -> dict:
    msg = json.loads(raw)
    msg["properties"].pop("delivery_tag")
    msg["properties"].pop("reply_to")
    msg["headers"].pop("origin")
    return msg


def test_hand_built_message_equals_send_task():
    r = redis.Redis.from_url(URL)
    r.flushdb()
    try:
        app = broker.producer(URL)
        app.send_task(
            TASK_RUN_JOB,
            args=["0123456789abcdef"],
            queue="t.celery",
            routing_key="t.celery",
            task_id="0123456789abcdef.0",
            argsrepr="0123456789abcdef",
            kwargsrepr="",
        )
        broker.enqueue(URL, [("0123456789abcdef", "t.ours", 0)])
        ours, theirs = _strip(r.lindex("t.ours", 0)), _strip(r.lindex("t.celery", 0))
        theirs["properties"]["delivery_info"]["routing_key"] = "t.ours"
        theirs["properties"]["delivery_info"]["exchange"] = ours["properties"]["delivery_info"]["exchange"]
        assert ours == theirs
        # the worker's transport check passes what both senders write (siliconbench/worker/runtime/redis_transport.py)
        assert malformed(r.lindex("t.ours", 0)) is None and malformed(r.lindex("t.celery", 0)) is None
        assert broker.waiting_job_ids(URL, ["t.ours", "t.celery"]) == {"0123456789abcdef"}
    finally:
        r.flushdb()


def test_enqueue_keeps_order_within_a_queue():
    r = redis.Redis.from_url(URL)
    r.flushdb()
    try:
        ids = [f"{i:016x}" for i in range(2500)]
        broker.enqueue(URL, [(j, "t.order", 0) for j in ids])
        popped = [json.loads(x)["headers"]["id"].split(".")[0] for x in reversed(r.lrange("t.order", 0, -1))]
        assert popped == ids  # workers BRPOP from the tail: first in, first out
    finally:
        r.flushdb()
