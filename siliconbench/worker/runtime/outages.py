"""The worker's outages, one log line when the broker or the database goes away and one when it is back.

``DATABASE`` is shared by every part that writes (claims, results, heartbeats, lease renewals, the spool),
so a cut is one line, not one per thread and retry. Celery's consumer reconnects to the broker by itself
(forever: ``broker_connection_max_retries`` None in siliconbench.contract.queues) but logs every attempt, with the
next interval; ``quiet_celery_reconnects`` folds those into ``BROKER``'s two lines.
"""

from __future__ import annotations

import logging
import warnings

from celery.exceptions import CPendingDeprecationWarning

from siliconbench.storage.outages import Outage

log = logging.getLogger("siliconbench.worker")
DATABASE = Outage("worker", log)
BROKER = Outage("worker", log)

# Celery 5.7's lines (celery/worker/consumer/consumer.py CONNECTION_RETRY, CONNECTION_ERROR; connection.py).
_LOST = ("consumer: Connection to broker lost", "consumer: Cannot connect to")
_CONNECTED = "Connected to "
_LOGGERS = ("celery.worker.consumer.consumer", "celery.worker.consumer.connection")


class _ReconnectFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        msg = str(record.msg)
        if msg.startswith(_LOST) or (msg == "%s (%r)" and str(record.args[0]).startswith(_LOST)):
            args = record.args if isinstance(record.args, tuple) else ()
            err = next((a for a in args if isinstance(a, BaseException)), record.getMessage())
            BROKER.down(err, what="the broker (Redis)", note="Celery reconnects, at most every 30 s")
            return False
        if msg.startswith(_CONNECTED):
            return BROKER.up() is None  # the first connection's line stays; a reconnection has BROKER's
        return True


def quiet_celery_reconnects() -> None:
    # Printed at every connection loss; we chose the setting it is about (queues.py: off on purpose).
    warnings.filterwarnings(
        "ignore", r"\s*In Celery 5.1 we introduced an optional breaking change", CPendingDeprecationWarning
    )
    f = _ReconnectFilter()
    for name in _LOGGERS:
        logging.getLogger(name).addFilter(f)
