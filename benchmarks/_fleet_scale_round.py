"""One fleet size of benchmarks/fleet_scale.py: a fresh database and a private Redis, N workers joining (real
`siliconbench worker` processes, or benchmarks/_fleet_sim.py's simulated ones), an idle window, the coordinator's
reads, then a sweep of no-op jobs with a tenth of the workers killed (-9, by PID) part-way.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import psycopg
import redis
from sqlalchemy import func, select

from benchmarks import _fleet_probe as probe
from benchmarks._plumbing_round import ADMIN, cpu_s
from harness import noop_sweep
from harness.fleet import ROOT, RedisServer, WorkerProc, wait_for
from harness.pgbouncer import PgBouncer
from siliconbench.coordinator.fleet.reconcile import reconcile
from siliconbench.coordinator.fleet.roster import roster
from siliconbench.coordinator.watch.scheduler import tick
from siliconbench.storage import database, roles
from siliconbench.storage.tables import Host, Job, JobAttempt

SIM_PER_PROCESS = 25
RECONCILE_EVERY_S = 10
STEADY_EVERY_S = 10  # the steady phase: a claim per worker every 10 s on average
PROBE_EVERY_S = 0.2  # the probe's claims, apart
QUEUE = noop_sweep.NOOP_QUEUE
CLAIMED = re.compile(rb"claimed in ([0-9.]+) ms")


@dataclass
class Fleet:
    """The workers of one size: their processes, how many workers each hosts, how to kill one by PID."""

    simulated: bool
    procs: list = field(default_factory=list)  # WorkerProc or Popen
    per_proc: list[int] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def pids(self) -> list[int]:
        return [p.pid if hasattr(p, "pid") else p.proc.pid for p in self.procs]

    def kill9(self, i: int) -> None:
        p = self.procs[i]
        if self.simulated:
            p.kill()  # SIGKILL by the PID we started
            p.wait(10)
        else:
            p.kill9()

    def stop(self) -> None:
        """Every stop asked first (SIGTERM, by PID), then each waited for: a hundred workers leave together."""
        for p in self.procs:
            proc = p if self.simulated else p.proc
            if proc.poll() is None:
                proc.terminate()
        for p in self.procs:
            if not self.simulated:
                p.stop()
                continue
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


def start_fleet(n: int, simulated: bool, broker: str, url, folder: Path, env: dict) -> Fleet:
    """``url``: the database URL every worker uses (the pooled login's), or a function of the worker's name giving
    its own login's."""
    models = folder / "models"
    models.mkdir(exist_ok=True)
    fleet = Fleet(simulated)
    if not simulated:
        for i in range(n):
            w = WorkerProc(
                f"w-{i}", broker=broker, database=url(f"w-{i}") if callable(url) else url, models_dir=models,
                log_dir=folder,
                env={**env, "SILICONBENCH_WORKER_EXTRA_QUEUES": QUEUE},
            )  # fmt: skip
            fleet.procs.append(w)
            fleet.per_proc.append(1)
            fleet.logs.append(w.log_path)
        for w in fleet.procs:
            w.wait_ready(timeout_s=600)
        return fleet
    for first in range(0, n, SIM_PER_PROCESS):
        count = min(SIM_PER_PROCESS, n - first)
        log = folder / f"sim-{first}.log"
        out = open(log, "wb")  # noqa: SIM115 (the child writes to it for its life)
        fleet.procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "benchmarks._fleet_sim", "--prefix", "s", "--first", str(first), "--count",
                 str(count), "--broker", broker, "--database", url, "--models", str(models), "--spool",
                 str(folder / "spool"), "--queue", QUEUE],
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env},
            )
        )  # fmt: skip
        fleet.per_proc.append(count)
        fleet.logs.append(log)
    wait_for(
        lambda: all(b"ready" in p.read_bytes() for p in fleet.logs) or any(x.poll() is not None for x in fleet.procs),
        900,
        every_s=1,
        what="the simulated workers",
    )
    dead = [str(lg) for lg, x in zip(fleet.logs, fleet.procs, strict=True) if x.poll() is not None]
    assert not dead, "a simulator exited: " + " ".join(Path(d).read_text()[-1500:] for d in dead)
    return fleet


def tcp_per_worker(fleet: Fleet, port: int) -> float:
    """Open TCP connections from the fleet's processes to ``port``, per worker (Linux/macOS: psutil)."""
    pids = set(fleet.pids())
    conns = [c for c in psutil.net_connections("tcp") if c.pid in pids and c.raddr and c.raddr.port == port]
    return len(conns) / sum(fleet.per_proc)


def log_marks(fleet: Fleet) -> list[int]:
    """Where each worker's log ends now: the claims of a phase are the lines written after."""
    return [lg.stat().st_size if lg.exists() else 0 for lg in fleet.logs]


def claims_since(fleet: Fleet, marks: list[int]) -> list[float]:
    """The "claimed in N ms" figures the workers logged since ``marks`` (siliconbench.worker.runtime.task)."""
    out = []
    for lg, mark in zip(fleet.logs, marks, strict=True):
        with open(lg, "rb") as f:
            f.seek(mark)
            out += [float(m) for m in CLAIMED.findall(f.read())]
    return out


def sweeps_done(url: str, sweep_ids: list[str]) -> bool:
    with database.session_scope(url) as s:
        return not s.scalar(
            select(func.count())
            .select_from(Job)
            .where(Job.sweep_id.in_(sweep_ids), Job.status.not_in(("ok", "failed")))
        )


def p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))] if values else float("nan")


def timed(fn, times: int) -> list[float]:
    out = []
    for _ in range(times):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def one_size(
    n: int, *, simulated: bool, jobs: int, idle_s: float, steady_s: float, pooled: bool, kill_share: float
) -> dict:
    """Every figure of one fleet size, as a dict (the table's row)."""

    name = f"sb_fleet_{uuid.uuid4().hex[:8]}"
    folder = Path(f"/tmp/{name}")
    folder.mkdir()
    with psycopg.connect(ADMIN, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    url = database.normalize_url(ADMIN).set(database=name).render_as_string(hide_password=False)
    database.upgrade(url)
    redis_server = RedisServer().start()
    # Workers on least-privilege logins, as a fleet runs: each its own when connecting directly; through PgBouncer
    # the one pooled worker login (migration 0017), whose pool every worker shares.
    bouncer = PgBouncer([roles.POOLED_LOGIN]).start() if pooled else None
    if bouncer:
        roles.create_login(url, "worker", roles.POOLED_LOGIN, host=roles.POOLED_HOST)
        worker_url = bouncer.url(name, user=roles.POOLED_LOGIN)
    else:
        assert not simulated, "simulated workers connect through PgBouncer (--pooled-above below --real-max)"

        def worker_url(host: str) -> str:
            return roles.create_login(url, "worker", roles.login_for(host), host=host).rendered()

    env = {"SILICONBENCH_LEASE_S": "10", **({"SILICONBENCH_DATABASE_POOLED": "1"} if pooled else {})}
    row: dict = {"workers": n, "kind": "simulated" if simulated else "real", "pgbouncer": pooled}
    fleet = None

    def backends() -> list[int]:
        with psycopg.connect(ADMIN, autocommit=True) as c:
            return [pid for (pid,) in c.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [name])]

    def writes() -> int:
        with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as c:
            return int(
                c.execute("SELECT sum(n_tup_upd + n_tup_ins + n_tup_del) FROM pg_stat_user_tables").fetchone()[0]
            )

    def commands() -> int:
        return int(redis.Redis.from_url(redis_server.url).info("stats")["total_commands_processed"])

    try:
        t0 = time.perf_counter()
        fleet = start_fleet(n, simulated, redis_server.url, worker_url, folder, env)

        def online() -> int:
            with database.session_scope(url) as s:
                return s.scalar(select(func.count()).select_from(Host).where(Host.online.is_(True)))

        wait_for(lambda: online() == n, 600, every_s=1, what=f"{n} workers online")
        row["all_online_s"] = time.perf_counter() - t0
        row["rss_mib_per_worker"] = sum(psutil.Process(q).memory_info().rss for q in fleet.pids()) / n / 2**20
        time.sleep(6)  # every heartbeat thread past its spread first beat
        database.dispose(url)
        w0, c0, cpu0, t_idle = writes(), commands(), cpu_s(backends()), time.perf_counter()
        time.sleep(idle_s)
        elapsed = time.perf_counter() - t_idle
        row["pg_writes_per_s_idle"] = (writes() - w0) / elapsed
        row["broker_cmds_per_s_idle"] = (commands() - c0 - 1) / elapsed
        row["pg_cpu_ms_per_s_idle"] = (cpu_s(backends()) - cpu0) / elapsed * 1000
        row["pg_conn_per_worker_idle"] = tcp_per_worker(fleet, bouncer.port if bouncer else 5432)
        row["pg_server_conns_idle"] = len(backends())
        row["redis_conn_per_worker_idle"] = tcp_per_worker(fleet, redis_server.port)

        def fleet_page():
            with database.session_scope(url) as s:
                roster(s)

        row["fleet_page_p95_ms"] = p(timed(fleet_page, 20), 0.95)
        shown = [
            subprocess.run([sys.executable, "-m", "siliconbench.cli.main", "workers"], cwd=ROOT, capture_output=True,
                           env={**os.environ, "SILICONBENCH_DATABASE_URL": url, "SILICONBENCH_BROKER_URL": redis_server.url})
            for _ in range(3)
        ]  # fmt: skip
        assert all(r.returncode == 0 for r in shown), shown[0].stderr[-2000:]
        row["workers_cli_p95_ms"] = p(timed(lambda: subprocess.run(
            [sys.executable, "-m", "siliconbench.cli.main", "workers"], cwd=ROOT, capture_output=True,
            env={**os.environ, "SILICONBENCH_DATABASE_URL": url, "SILICONBENCH_BROKER_URL": redis_server.url}), 5), 0.95)  # fmt: skip
        row["tick_p95_ms"] = p(timed(lambda: tick(url, redis_server.url, checker="fleet-scale"), 5), 0.95)
        row["reconcile_idle_p95_ms"] = p(timed(lambda: reconcile(url, redis_server.url), 5), 0.95)

        # --- the fleet's steady load: each worker claims a job every STEADY_EVERY_S on average (a short benchmark
        # job's length), while every heartbeat goes on; what one claim costs at this size
        marks = log_marks(fleet)
        # ...and one more worker, the probe, in a process of its own, claiming its own jobs all along
        probe_sweep = noop_sweep.store_and_enqueue(url, redis_server.url, int(steady_s / PROBE_EVERY_S), "probe.none")
        probe_url = worker_url(probe.NAME) if callable(worker_url) else worker_url
        prober = subprocess.Popen(
            [sys.executable, "-m", "benchmarks._fleet_probe", "--database", probe_url, "--sweep", probe_sweep,
             "--every-s", str(PROBE_EVERY_S)],
            cwd=ROOT, stdout=subprocess.PIPE, env={**os.environ, **env},
        )  # fmt: skip
        steady_ids = []
        t_steady = time.monotonic()
        while time.monotonic() - t_steady < steady_s:
            steady_ids.append(noop_sweep.store_and_enqueue(url, redis_server.url, max(1, round(n / STEADY_EVERY_S))))
            time.sleep(max(0.0, t_steady + len(steady_ids) - time.monotonic()))
        wait_for(lambda: sweeps_done(url, steady_ids), 300, every_s=1, what="the steady phase's jobs")
        probed, _ = prober.communicate(timeout=300)
        assert prober.returncode == 0, "the probe failed"
        probed = json.loads(probed)
        row["claim_p50_ms"], row["claim_p99_ms"] = p(probed, 0.5), p(probed, 0.99)
        steady = claims_since(fleet, marks)
        row["claims_steady"] = len(steady)
        row["claim_workers_p50_ms"], row["claim_workers_p99_ms"] = p(steady, 0.5), p(steady, 0.99)
        marks = log_marks(fleet)

        # --- the sweep: stored, enqueued to the capability queue every worker consumes, then run
        t1 = time.perf_counter()
        sweep_id = noop_sweep.store_and_enqueue(url, redis_server.url, jobs, QUEUE)
        row["store_and_enqueue_s"] = time.perf_counter() - t1

        def done() -> int:
            with database.session_scope(url) as s:
                return s.scalar(
                    select(func.count()).select_from(Job).where(Job.sweep_id == sweep_id, Job.status.in_(("ok", "failed")))
                )  # fmt: skip

        killed: list[str] = []
        reconciles: list[float] = []
        kills = max(1, round(len(fleet.procs) * kill_share)) if kill_share else 0
        w1, c1, cpu1, t_busy, busy_conns = writes(), commands(), cpu_s(backends()), time.perf_counter(), []
        deadline, next_reconcile = time.monotonic() + 900, 0.0
        while (finished := done()) < jobs:
            assert time.monotonic() < deadline, f"{finished} of {jobs} jobs after 900 s"
            if len(busy_conns) < 3 and finished > jobs * 0.1:
                busy_conns.append(tcp_per_worker(fleet, bouncer.port if bouncer else 5432))
            if kills and not killed and finished >= jobs * 0.3:
                for i in range(kills):  # a tenth of the workers, killed by the PIDs we started
                    fleet.kill9(i)
                    first = sum(fleet.per_proc[:i])
                    killed += [f"{'s' if simulated else 'w'}-{k}" for k in range(first, first + fleet.per_proc[i])]
            if time.monotonic() >= next_reconcile:  # as `reconcile --loop --every 10` runs in compose
                reconciles += timed(lambda: reconcile(url, redis_server.url), 1)
                next_reconcile = time.monotonic() + RECONCILE_EVERY_S
            time.sleep(1)
        busy_s = time.perf_counter() - t_busy
        row["sweep_s"] = busy_s
        row["jobs_per_s"] = jobs / busy_s
        row["pg_writes_per_s_busy"] = (writes() - w1) / busy_s
        row["broker_cmds_per_s_busy"] = (commands() - c1) / busy_s
        row["pg_cpu_ms_per_job"] = (cpu_s(backends()) - cpu1) / jobs * 1000
        row["pg_conn_per_worker_busy"] = statistics.median(busy_conns) if busy_conns else float("nan")
        row["reconcile_storm_p95_ms"] = p(reconciles, 0.95)
        row["killed_workers"] = len(killed)
        with database.session_scope(url) as s:
            states = s.execute(
                select(Job.status, Job.attempts, Job.interruptions, Job.error).where(Job.sweep_id == sweep_id)
            ).all()
        row["lost"] = sum(st != "ok" for st, *_ in states)
        # every attempt that ended without its result, and whose worker it was: a killed worker's job runs again
        # (once); one whose worker lived ran twice (its lease lapsed while the worker was starved of CPU)
        with database.session_scope(url) as s:
            ended = s.execute(
                select(JobAttempt.worker).join(Job, Job.id == JobAttempt.job_id).where(Job.sweep_id == sweep_id)
            ).all()
        row["rerun_after_kill"] = sum(w in killed for (w,) in ended)
        row["run_twice"] = sum(w not in killed for (w,) in ended)
        storm = claims_since(fleet, marks)
        row["claim_storm_p50_ms"], row["claim_storm_p99_ms"] = p(storm, 0.5), p(storm, 0.99)
        row["pg_server_conns_max"] = len(backends())
    finally:
        if fleet is not None:
            fleet.stop()
        if bouncer is not None:
            bouncer.stop()
        redis_server.stop()
        database.dispose(url)
        with psycopg.connect(ADMIN, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return row
