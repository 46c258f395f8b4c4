"""Processes that outlive their dependencies: the broker or the database allowed to go away.

An outage (the broker or the database unreachable) is logged once when it starts and once when it ends
(``Outage``); in between, work is retried with capped exponential backoff: a step run forever
(``run_forever``: the reconciler loop) or one call retried until it goes through (``call_through``: the
worker's claims, the dashboard runner's writes). Any other exception is a bug, never taken for an outage.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import exc as sa_exc

from siliconbench.contract.errors import UserError

# What "the database is away" raises, as opposed to a bug.
DATABASE_OUTAGES = (sa_exc.OperationalError, sa_exc.InterfaceError, ConnectionError, TimeoutError)
# What a running worker's database call raises while the database is away: the outages, and UserError, which
# siliconbench.storage.database raises when it cannot open the database (its host unresolvable, the server refusing us).
DATABASE_DOWN = DATABASE_OUTAGES + (UserError,)
# The broker's (redis.exceptions) are known by name, so that everything which uses the database does not load
# the broker's client: siliconbench.storage.broker is the one module of storage that imports it.
BROKER_OUTAGES = ("ConnectionError", "TimeoutError")
MAX_BACKOFF_S = 60.0
T = TypeVar("T")


def from_broker(err: BaseException) -> bool:
    return type(err).__module__.split(".")[0] == "redis"


def is_outage(err: BaseException) -> bool:
    """The broker or the database unreachable (an outage), as opposed to a bug."""
    return isinstance(err, DATABASE_OUTAGES) or any(
        c.__module__ == "redis.exceptions" and c.__name__ in BROKER_OUTAGES for c in type(err).__mro__
    )


def what_is_down(err: BaseException) -> str:
    return "the broker (Redis)" if from_broker(err) else "the database"


def first_line(err: BaseException | str) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:200]


class Outage:
    """The outages of one process part: one line when one starts, one when it ends, nothing in between.

    Thread-safe: a worker's heartbeat, lease keeper and job thread all report to the same one, so a
    database cut is one line, not one per thread and retry.
    """

    def __init__(self, name: str, log: logging.Logger, clock: Callable[[], float] = time.monotonic):
        self.name, self.log, self.clock = name, log, clock
        self.what: str | None = None  # what is down now; None while all is well
        self.since = 0.0
        self._lock = threading.Lock()

    def down(self, err: BaseException | str, what: str | None = None, note: str = "retrying") -> bool:
        """Report a failed attempt; True (and one log line) only for the first of an outage."""
        with self._lock:
            if self.what is not None:
                return False
            self.what, self.since = what or what_is_down(err), self.clock()
        self.log.warning("%s: %s is unreachable (%s); %s", self.name, self.what, first_line(err), note)
        return True

    def up(self) -> float | None:
        """Report a success; ends the outage (one log line) if there was one, returning its length."""
        with self._lock:
            if self.what is None:
                return None
            what, lasted, self.what = self.what, self.clock() - self.since, None
        self.log.warning("%s: %s is reachable again after %.0f s", self.name, what, lasted)
        return lasted


def run_forever(
    step: Callable[[], object],
    every_s: float,
    *,
    name: str,
    log: logging.Logger,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    max_backoff_s: float = MAX_BACKOFF_S,
    stop: Callable[[], bool] = lambda: False,
) -> None:
    """Call ``step`` every ``every_s`` until ``stop()``; survive outages as the module says."""
    outage = Outage(name, log, clock)
    backoff = every_s
    while not stop():
        try:
            step()
        except Exception as err:
            if not is_outage(err):  # a bug in the step, not an outage: say so loudly, keep serving
                log.exception("%s: the step failed", name)
            else:
                outage.down(err, note=f"retrying, at most every {max_backoff_s:.0f} s")
                backoff = min(max(backoff * 2, every_s), max_backoff_s)
                sleep(backoff)
                continue
        if outage.up() is not None:
            backoff = every_s
        sleep(every_s)


def call_through(
    fn: Callable[[], T],
    outage: Outage,
    *,
    patience_s: float | None = None,
    first_delay_s: float = 0.5,
    max_backoff_s: float = 5.0,
    outages: tuple | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``fn()``, retried with capped backoff while a dependency is unreachable; after ``patience_s`` (None:
    never) the last outage error is raised to the caller, which decides what giving up means. ``outages``: the
    exception classes that count as one (default: ``is_outage``, the broker's or the database's)."""
    deadline = None if patience_s is None else clock() + patience_s
    delay = first_delay_s
    while True:
        try:
            value = fn()
        except Exception as err:
            if not (isinstance(err, outages) if outages is not None else is_outage(err)):
                raise
            outage.down(err, note=f"retrying, at most every {max_backoff_s:.0f} s")
            if deadline is not None and clock() + delay > deadline:
                raise
            sleep(delay)
            delay = min(delay * 2, max_backoff_s)
            continue
        outage.up()
        return value
