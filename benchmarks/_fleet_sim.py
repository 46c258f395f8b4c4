"""Simulated workers for benchmarks/fleet_scale.py beyond what real `siliconbench worker` processes fit in memory.

One process hosts ``--count`` workers. Each is the worker's own code from registration on: ``register`` (its host
row, its queues), the ``Heartbeat`` thread, ``handle_job`` (the claim on its held connection, the lease keeper,
the result write), each with its own database engine and connections, as a worker process has. What is not the
worker's: Celery's consumer is replaced by a BRPOP of the same Redis lists (one Redis connection a worker, acked
on receipt, so a kill -9 leaves the claimed job to the lease's expiry, as a real worker's unacked message is left
to the reconciler), host facts are read once per process, and the jobs are no-ops (benchmarks/plumbing.py's).

    python -m benchmarks._fleet_sim --prefix sim --first 0 --count 100 --broker URL --database URL --models DIR
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import logging
import signal
import sys
import threading
from pathlib import Path

import redis

from siliconbench.contract.queues import host_queue

from siliconbench.storage.database import as_application, hold_no_idle_connections
from siliconbench.worker.runtime import registration
from siliconbench.worker.runtime.registration import Heartbeat, mark_offline, register
from siliconbench.worker.runtime.spool import Spool
from siliconbench.worker.runtime.task import WorkerContext, handle_job


def consume(ctx: WorkerContext, broker: str, queues: list[str], stopped: threading.Event) -> None:
    r = redis.Redis.from_url(broker)
    while not stopped.is_set():
        got = r.brpop(queues, timeout=1)
        if got is None:
            continue
        message = json.loads(got[1])
        args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        handle_job(args[0], ctx)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--first", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--broker", required=True)
    ap.add_argument("--database", required=True)
    ap.add_argument("--models", type=Path, required=True)
    ap.add_argument("--spool", type=Path, required=True)
    ap.add_argument("--queue", default="cap.noop")
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("siliconbench.worker.runtime.task").setLevel(logging.INFO)  # its "claimed in" lines
    registration.host_facts = functools.cache(registration.host_facts)  # the same facts for every worker here
    hold_no_idle_connections()  # as celery_app.start: each worker's one connection is its held one
    stopped = threading.Event()
    workers = []
    for i in range(a.first, a.first + a.count):
        name = f"{a.prefix}-{i}"
        url = as_application(a.database, name)  # as the worker's own; and an engine (pool) of its own
        ctx = WorkerContext(
            name=name, database_url=url, models_dir=a.models, spool=Spool(a.spool / name), hostname=name
        )
        queues = register(url, name, a.models)
        Heartbeat(url, name, spool=ctx.spool, ctx=ctx).start()
        threading.Thread(
            target=consume,
            args=(ctx, a.broker, list(dict.fromkeys([host_queue(name), a.queue, *queues])), stopped),
            daemon=True,
        ).start()
        workers.append(ctx)
    print(f"ready {len(workers)}", flush=True)

    def stop(*_):
        stopped.set()
        for ctx in workers:
            mark_offline(ctx.database_url, ctx.name)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
