"""One check at a time fleet-wide: the scheduler's database lock, in-process on SQLite and
PostgreSQL, then two real `siliconbench scheduler` processes (Celery beat + worker each) started at once on the
same Redis and PostgreSQL by mistake, checking three watches on a deliberately slow local index; one is killed
by its PID while it holds the lock and the other carries on."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import psutil
import pytest
from sqlalchemy import func, select, text

from siliconbench.contract.watch_spec import parse_watch

from harness.fleet import CliProc, wait_for
from siliconbench.coordinator.watch import scheduler, watches
from siliconbench.coordinator.watch.scheduler import SKIPPED, fleet_lock
from siliconbench.storage import database, roles
from siliconbench.storage.tables import utcnow
from siliconbench.storage.watch_tables import Campaign, Watch, WatchCheck
from tests.conftest import SMALL
from tests.index_support import SimpleIndex, folder_with

WATCHES = ("w-a", "w-b", "w-c")
DELAY_S = 0.7  # per index request: a tick checking three watches takes over 2 s, two beats tick every second


class SlowIndex(SimpleIndex):
    """The folder served as a simple index, each request answered after ``delay_s`` (a slow registry)."""

    def __init__(self, folder: Path, delay_s: float):
        self.delay_s = delay_s
        super().__init__(folder)

    def _handler(self):
        base, delay = super()._handler(), self.delay_s

        class Slow(base):
            def do_GET(self):
                time.sleep(delay)
                base.do_GET(self)

        return Slow


@pytest.fixture(autouse=True)
def _default_index(monkeypatch):
    monkeypatch.delenv("SILICONBENCH_PACKAGE_INDEX", raising=False)


def add_watches(url: str, index: str, names=WATCHES) -> None:
    with database.session_scope(url) as s:
        for name in names:
            watches.add(
                s,
                parse_watch(
                    {
                        "name": name,
                        "packages": ["mlx-lm"],
                        "every": "1m",
                        "index": index,
                        "suite": {"name": "suite", "models": [SMALL], "engines": ["mlx"]},
                    },
                    check_folders=False,
                ),
            )


def test_lock_is_exclusive_and_a_second_tick_skips_at_once(empty_db):
    with fleet_lock(empty_db) as first:
        assert first
        with fleet_lock(empty_db) as second:
            assert not second
        t0 = time.monotonic()
        out = scheduler.tick(empty_db, "redis://127.0.0.1:6379/10", checker="test")
        assert out["status"] == SKIPPED and time.monotonic() - t0 < 2
    with fleet_lock(empty_db) as again:  # released at the end of the block
        assert again
    out = scheduler.tick(empty_db, "redis://127.0.0.1:6379/10", checker="test")
    assert out["status"] == "ran" and out["checks"] == {} and out["campaigns"] == {}


def checks(url: str) -> list[WatchCheck]:
    with database.session_scope(url) as s:
        return list(s.scalars(select(WatchCheck).order_by(WatchCheck.started_at)))


def counts(url: str) -> dict[str, int]:
    with database.session_scope(url) as s:
        return dict(s.execute(select(WatchCheck.watch, func.count()).group_by(WatchCheck.watch)).all())


def age(url: str, seconds: float = 61) -> None:
    """A due period passes: every watch was last checked ``seconds`` earlier than recorded."""
    with database.session_scope(url) as s:
        for w in s.scalars(select(Watch)):
            w.last_checked_at = w.last_checked_at - timedelta(seconds=seconds)


def holder_port(url: str) -> int | None:
    """The client port of the connection holding an advisory lock in this test's database."""
    with database.session_scope(url) as s:
        return s.execute(
            text(
                "SELECT a.client_port FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = "
                "'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
        ).scalar()


def owner_of(port: int, procs: list[CliProc]) -> CliProc | None:
    for p in procs:
        if p.alive() and any(c.laddr and c.laddr.port == port for c in psutil.Process(p.pid).net_connections("tcp")):
            return p
    return None


def round_done(url: str, n: int):
    c = counts(url)
    return c if all(c.get(w, 0) >= n for w in WATCHES) else None


def test_two_schedulers_started_by_mistake_never_overlap(pg_url, private_broker, tmp_path):  # noqa: F811
    folder = folder_with(["0.31.3"], tmp_path / "index")
    login = roles.create_login(pg_url, "coordinator", roles.login_for("scheduler-test", "coordinator"))
    db_url = login.url.render_as_string(hide_password=False)
    with SlowIndex(folder, DELAY_S) as index:
        add_watches(pg_url, index.url)
        env = {"SILICONBENCH_LOG_LEVEL": "INFO"}
        procs = [
            CliProc(
                f"sched-{x}",
                [
                    "scheduler",
                    "--broker",
                    private_broker,
                    "--database",
                    db_url,
                    "--tick-s",
                    "1",
                    "--schedule",
                    str(tmp_path / f"beat-{x}"),
                ],
                env,
                tmp_path,
            )
            for x in "ab"
        ]
        try:
            # Round 1: the first look at the index records what is there; no campaign.
            wait_for(lambda: round_done(pg_url, 1), 90, every_s=0.5, what="round 1 of checks")
            time.sleep(4)  # several more ticks: nothing is due, nothing is checked again
            assert counts(pg_url) == {w: 1 for w in WATCHES}
            # Round 2: a new release appears and a due period passes: one campaign per watch.
            folder_with(["0.32.2"], folder)
            age(pg_url)
            wait_for(lambda: round_done(pg_url, 2), 90, every_s=0.5, what="round 2 of checks")
            time.sleep(4)
            assert counts(pg_url) == {w: 2 for w in WATCHES}
            # Round 3: the scheduler holding the lock is killed (kill -9, by its PID) between two checks of a tick.
            age(pg_url)
            wait_for(
                lambda: 3 in counts(pg_url).values() and not round_done(pg_url, 3),
                60,
                every_s=0.05,
                what="round 3 under way",
            )
            victim = owner_of(wait_for(lambda: holder_port(pg_url), 10, every_s=0.02, what="the lock's holder"), procs)
            assert victim is not None, [p.pid for p in procs]
            os.kill(victim.pid, signal.SIGKILL)
            victim.proc.wait(10)
            killed_at = utcnow()
            survivor = next(p for p in procs if p is not victim)
            wait_for(lambda: round_done(pg_url, 3), 90, every_s=0.5, what="round 3, by the survivor")
            time.sleep(4)
            assert counts(pg_url) == {w: 3 for w in WATCHES}, survivor.logs()[-3000:]
            assert survivor.alive()
        finally:
            for p in procs:
                p.stop()
    rows = checks(pg_url)
    for before, after in pairwise(rows):  # never two checks at once, by whichever scheduler
        assert after.started_at >= before.finished_at, (
            before.checker,
            before.started_at,
            before.finished_at,
            after.checker,
            after.started_at,
        )
    after = [r.checker for r in rows if r.started_at > killed_at]
    assert after and all(c.endswith(f" pid {survivor.pid}") for c in after), after  # the survivor took over
    with database.session_scope(pg_url) as s:  # one campaign per watch and release, however many ticks ran
        made = s.execute(
            select(Campaign.watch, Campaign.candidate, func.count()).group_by(Campaign.watch, Campaign.candidate)
        ).all()
    assert sorted(made) == [(w, "0.32.2", 1) for w in WATCHES]
    logs = victim.logs() + survivor.logs()
    assert SKIPPED in logs  # the other scheduler's ticks found the lock held and returned at once
    assert "Traceback" not in survivor.logs(), survivor.logs()[-3000:]


def test_tick_records_its_checker_on_each_check(pg_url, tmp_path):  # noqa: F811
    folder = folder_with(["0.31.3"], tmp_path / "index")
    add_watches(pg_url, str(folder), names=("solo",))
    out = scheduler.tick(pg_url, "redis://127.0.0.1:6379/10", checker="host-x pid 1")
    assert out["status"] == "ran" and out["checks"] == {"solo": []}
    assert [r.checker for r in checks(pg_url)] == ["host-x pid 1"]
    again = scheduler.tick(pg_url, "redis://127.0.0.1:6379/10", checker="host-x pid 1")
    assert again["checks"] == {}  # not due again within its period
    age(pg_url, 120)
    assert scheduler.tick(pg_url, "redis://127.0.0.1:6379/10", checker="y")["checks"] == {"solo": []}
