"""siliconbench.storage.outages.run_forever: real outage exceptions (a Redis client on a closed port, a PostgreSQL URL that
refuses) are waited out with capped backoff, one log line each way; a bug in the step never ends the loop."""

from __future__ import annotations

import logging

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from sqlalchemy import create_engine, text

from harness.fleet import free_port
from siliconbench.storage.outages import run_forever


class Clock:
    def __init__(self):
        self.now, self.sleeps = 0.0, []

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def redis_down():
    redis.Redis(port=free_port(), socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0)).ping()  # no client retries


def database_down():
    with create_engine(f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/none").connect() as c:
        c.execute(text("select 1"))


@pytest.mark.parametrize("failing, what", [(redis_down, "the broker (Redis)"), (database_down, "the database")])
def test_an_outage_is_waited_out_with_capped_backoff_and_logged_once_each_way(failing, what, caplog):
    clock, calls = Clock(), []

    def step():
        calls.append(clock.now)
        if len(calls) <= 6:  # down for six attempts, then back
            failing()

    with caplog.at_level(logging.WARNING):
        run_forever(
            step,
            1.0,
            name="t",
            log=logging.getLogger("t"),
            sleep=clock.sleep,
            clock=lambda: clock.now,
            max_backoff_s=8.0,
            stop=lambda: len(calls) >= 8,
        )
    assert clock.sleeps[:6] == [2.0, 4.0, 8.0, 8.0, 8.0, 8.0]  # doubling, capped
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and f"{what} is unreachable" in lines[0] and "reachable again after 38 s" in lines[1]


def test_a_bug_in_the_step_is_logged_and_the_loop_goes_on(caplog):
    clock, calls = Clock(), []

    def step():
        calls.append(1)
        raise KeyError("bug")

    run_forever(step, 1.0, name="t", log=logging.getLogger("t"), sleep=clock.sleep, stop=lambda: len(calls) >= 3)
    assert len(calls) == 3 and clock.sleeps == [1.0, 1.0, 1.0]
    assert sum("the step failed" in r.getMessage() for r in caplog.records) == 3
