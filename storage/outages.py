"""Loops that outlive their dependencies: a step run forever, the broker or the database allowed to go away.

An outage (the broker or the database unreachable) is logged once when it starts and once when it ends;
in between the step is retried with capped exponential backoff, and the loop never exits on it. Any
other exception is a bug in the step: logged with its traceback, and the loop goes on at its pace.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

import redis
from sqlalchemy import exc as sa_exc

# What "the broker or the database is away" raises, as opposed to a bug.
OUTAGES = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, sa_exc.OperationalError,
           sa_exc.InterfaceError, ConnectionError, TimeoutError)
MAX_BACKOFF_S = 60.0


def what_is_down(err: BaseException) -> str:
    return "the broker (Redis)" if isinstance(err, redis.exceptions.RedisError) else "the database"


def run_forever(step: Callable[[], object], every_s: float, *, name: str, log: logging.Logger,
                sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                max_backoff_s: float = MAX_BACKOFF_S, stop: Callable[[], bool] = lambda: False) -> None:
    """Call ``step`` every ``every_s`` until ``stop()``; survive outages as the module says."""
    down_since: float | None = None
    backoff = every_s
    while not stop():
        try:
            step()
        except OUTAGES as err:
            if down_since is None:
                down_since = clock()
                log.warning("%s: %s is unreachable (%s); retrying, at most every %.0f s", name,
                            what_is_down(err), str(err).splitlines()[0][:200], max_backoff_s)
            backoff = min(max(backoff * 2, every_s), max_backoff_s)
            sleep(backoff)
            continue
        except Exception:  # a bug in the step, not an outage: say so loudly, keep serving
            log.exception("%s: the step failed", name)
        if down_since is not None:
            log.warning("%s: dependencies reachable again after %.0f s", name, clock() - down_since)
            down_since, backoff = None, every_s
        sleep(every_s)
