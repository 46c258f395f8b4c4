"""Forty real `siliconbench worker` processes on one coordinator, each on its own least-privilege login: they join,
are listed by SKU and state and paged (`siliconbench workers`), each costs PostgreSQL one connection and Redis at
most three while idle, run a sweep's no-op jobs each once, and leave. benchmarks/fleet_scale.py measures the same
from 10 to 1,000 workers (docs/fleet.md).

Solo: forty workers take ~5 GiB and both cores while they start."""

from __future__ import annotations

import signal
from collections import Counter

import psutil
import pytest
import redis
from sqlalchemy import select

from harness.fleet import WorkerProc, wait_for
from harness.noop_sweep import NOOP_QUEUE, store_and_enqueue
from siliconbench.storage import database
from siliconbench.storage.tables import Job
from tests.cli_support import sb
from tests.fleet.support import worker_login

pytestmark = [pytest.mark.solo, pytest.mark.timeout(900)]
N = 40


def _tcp_to(port: int, pids: set[int]) -> Counter:
    return Counter(c.pid for c in psutil.net_connections("tcp") if c.pid in pids and c.raddr and c.raddr.port == port)


def test_forty_workers_join_are_summarised_and_paged_run_a_sweep_once_and_leave(tmp_path, pg_url, broker_url):
    names = [f"mini-{i:02d}" for i in range(N)]
    models = tmp_path / "models"
    models.mkdir()
    env = {"SILICONBENCH_DATABASE_URL": pg_url, "SILICONBENCH_BROKER_URL": broker_url}
    procs = [
        WorkerProc(n, broker=broker_url, database=worker_login(pg_url, n), models_dir=models, log_dir=tmp_path,
                   env={"SILICONBENCH_WORKER_EXTRA_QUEUES": NOOP_QUEUE, "XDG_DATA_HOME": str(tmp_path / "xdg")})
        for n in names
    ]  # fmt: skip
    try:
        for p in procs:
            p.wait_ready(timeout_s=300)
        wait_for(lambda: "40 online" in sb("workers", env=env).stdout, 60, every_s=2, what="40 workers online")

        # listed as a fleet's owner reads it: one line per SKU and state, then a page of hosts and the next command
        shown = sb("workers", "--per-page", "15", "--page", "3", env=env)
        assert shown.returncode == 0, shown.stderr
        assert "40 worker(s): 40 online, 0 busy, 0 offline" in shown.stdout
        assert "page 3 of 3 (40 host(s))" in shown.stdout
        assert "mini-39" in shown.stdout and "mini-29" not in shown.stdout and "next:" not in shown.stdout
        first = sb("workers", "--per-page", "15", "--state", "online", env=env).stdout
        assert "page 1 of 3" in first and "next: siliconbench workers --page 2 --state online" in first
        for bad, field in ((("--state", "asleep"), "state"), (("--page", "0"), "page"), (("--sku", "Z80"), "sku")):
            refused = sb("workers", *bad, env=env)
            assert refused.returncode != 0 and field in refused.stderr, refused.stderr

        # what each idle worker holds open: one PostgreSQL connection (its heartbeats'), at most three to Redis
        pids = {p.pid for p in procs}
        pg, rd = _tcp_to(5432, pids), _tcp_to(int(broker_url.rsplit(":", 1)[1].split("/")[0]), pids)
        assert max(pg[p] for p in pids) <= 1 and sum(pg.values()) >= N - 2, pg  # a beat may be between connections
        assert max(rd[p] for p in pids) <= 3, rd
        # and none listens to a broadcast (no remote control, events, gossip or mingle): nothing costs N² messages
        broker = redis.Redis.from_url(broker_url)
        assert broker.pubsub_channels() == [] and broker.pubsub_numpat() == 0
        assert not [c for c in broker.client_list() if int(c.get("sub", 0)) or int(c.get("psub", 0))]

        # a sweep's no-op jobs: every one run, and run once, over much of the fleet
        sweep_id = store_and_enqueue(pg_url, broker_url, 400)

        def finished():
            with database.session_scope(pg_url) as s:
                return s.execute(select(Job.status, Job.attempts, Job.worker).where(Job.sweep_id == sweep_id)).all()

        rows = wait_for(lambda: (r := finished()) and all(st == "ok" for st, *_ in r) and r, 300, every_s=1,
                        what="the sweep's 400 jobs")  # fmt: skip
        assert len(rows) == 400 and {a for _, a, _ in rows} == {1}
        assert len({w for *_, w in rows}) >= N // 2
    finally:
        for p in procs:  # every stop asked first, then each waited for: they leave together
            if p.alive():
                p.proc.send_signal(signal.SIGTERM)
        for p in procs:
            p.stop()
    left = sb("workers", env=env)
    assert "40 worker(s): 0 online, 0 busy, 40 offline" in left.stdout, left.stdout
