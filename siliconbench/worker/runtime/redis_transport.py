"""kombu's Redis transport with a decode step that no queue item can crash.

kombu decodes what BRPOP (or RPOP) returns before any Celery code sees it: bytes that are not JSON, a JSON
list or string, or an envelope whose body is not base64 raise inside the transport, and the worker dies with
"Unrecoverable error" (celery/celery#4308, still open). Here every popped item is checked first
(``malformed``); a bad one is logged in one line without its payload, parked on the ``DEAD_LETTER`` list
(the newest DEAD_LETTER_KEEP, each cut to DEAD_LETTER_HEAD bytes) for a person to look at, and the worker
goes on consuming. Well-formed envelopes go to kombu untouched; Celery itself then refuses a foreign content
type (pickle, YAML) and a malformed task body.

Its QoS also releases a job's prefetch slot when Redis is gone at the moment of the ack (``QoS``).

Selected by the worker only (``broker_transport`` in siliconbench/worker/runtime/celery_app.py): the coordinator never pops.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time

import redis
from kombu.transport import redis as kombu_redis, virtual
from kombu.transport.virtual import Empty
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

log = logging.getLogger(__name__)
DEAD_LETTER = "siliconbench.dead-letter"
DEAD_LETTER_KEEP = 1000
DEAD_LETTER_HEAD = 4096
MAX_ITEM_BYTES = 1 << 20  # a job message is ~1 KiB: anything near a MiB is not one of ours


def malformed(item: bytes) -> str | None:
    """Why ``item`` is not a kombu envelope kombu can decode, or None when it is one."""
    if len(item) > MAX_ITEM_BYTES:
        return f"{len(item):,} bytes, over the {MAX_ITEM_BYTES:,}-byte limit"
    try:
        env = json.loads(item)
    except (ValueError, UnicodeDecodeError):
        return "not JSON"
    if not isinstance(env, dict):
        return f"a JSON {type(env).__name__}, not an envelope"
    props, headers = env.get("properties"), env.get("headers")
    if not isinstance(props, dict) or not isinstance(headers, dict) or not isinstance(env.get("body"), str):
        return "an envelope without body, headers and properties"
    if not isinstance(props.get("delivery_info", {}), dict):
        return "an envelope whose delivery_info is not an object"
    if props.get("body_encoding") == "base64":
        try:
            base64.b64decode(env["body"], validate=True)
        except (binascii.Error, ValueError):
            return "a body that is not base64"
    return None


class GuardedRedis(redis.Redis):
    """The channel's Redis client: a BRPOP reply carrying a malformed item reads as no reply (kombu: Empty)."""

    park = staticmethod(lambda queue, item, reason: None)  # set per channel

    def parse_response(self, connection, command_name, **options):
        reply = super().parse_response(connection, command_name, **options)
        if command_name == "BRPOP" and reply:
            dest, item = reply
            reason = malformed(item)
            if reason:
                self.park(dest, item, reason)
                return None
        return reply


class QoS(kombu_redis.QoS):
    """kombu's Redis ack emulation, but an ack or reject Redis cannot take still frees the delivery's slot.

    kombu forgets a delivery only once Redis has taken its ack. Killed at that moment, the ack raises, Celery
    logs "Couldn't ack" and goes on, and the delivery stays held: with one job prefetched the channel never
    polls again, so it never touches the broker again and never learns it is gone or back. The worker stays
    up and silent for good (benchmarks/faults.py caught it; tests/fleet/test_survive_outages.py). Freed here,
    the next poll meets the dead connection and Celery's consumer reconnects as for any outage. The message
    stays in Redis's unacked index if Redis kept it, and comes back after the visibility timeout, where its
    job id makes it a no-op.
    """

    def ack(self, delivery_tag):
        try:
            super().ack(delivery_tag)
        except (redis.RedisError, OSError):
            virtual.QoS.ack(self, delivery_tag)  # only what kombu's ack does after Redis answered
            raise

    def reject(self, delivery_tag, requeue=False):
        try:
            super().reject(delivery_tag, requeue=requeue)
        except (redis.RedisError, OSError):
            virtual.QoS.ack(self, delivery_tag)
            raise


class Channel(kombu_redis.Channel):
    QoS = QoS

    def _get_client(self):
        channel = self

        class Client(GuardedRedis):
            park = staticmethod(channel.park)

        return Client

    def park(self, queue, item: bytes, reason: str) -> None:
        queue = queue.decode(errors="replace") if isinstance(queue, bytes) else str(queue)
        log.error(
            "dropped a malformed message from queue %s (%d bytes): %s; parked on the Redis list %s",
            queue,
            len(item),
            reason,
            DEAD_LETTER,
        )
        record = json.dumps(
            {
                "queue": queue,
                "reason": reason,
                "bytes": len(item),
                "at": time.time(),
                "head": item[:DEAD_LETTER_HEAD].decode("latin-1"),
            }
        )
        try:
            with self.conn_or_acquire() as client:  # the synchronous pool: never the BRPOP connection
                client.pipeline().lpush(DEAD_LETTER, record).ltrim(DEAD_LETTER, 0, DEAD_LETTER_KEEP - 1).execute()
        except redis.RedisError as exc:
            log.error("could not park it on %s: %s", DEAD_LETTER, exc)

    def _get(self, queue):
        """kombu's RPOP path (used where no event loop runs), with the same check."""
        with self.conn_or_acquire() as client:
            for pri in self.priority_steps:
                item = client.rpop(self._q_for_pri(queue, pri))
                if item:
                    self._maybe_update_queues_expire(client, queue)
                    reason = malformed(item)
                    if reason:
                        self.park(queue, item, reason)
                        raise Empty()
                    return loads(bytes_to_str(item))
            self._maybe_update_queues_expire(client, queue)
            raise Empty()


class Transport(kombu_redis.Transport):
    Channel = Channel
