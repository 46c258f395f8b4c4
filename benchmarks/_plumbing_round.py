"""One round of the plumbing benchmark (benchmarks/plumbing.py): a fresh database and Redis db, real workers on their
own logins, raw Celery no-ops, the siliconbench phase (expand, store, enqueue, run), raw Celery again; its table.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.table import Table

BROKER = "redis://127.0.0.1:6379/7"
ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def one_round(
    console: Console, jobs: int, workers: int, timeout_s: float, login: str, profile: Path | None
) -> tuple[float, float]:
    """One round: raw Celery, siliconbench, raw Celery; prints its table, returns (ours, raw mean) jobs/s."""
    import psycopg
    import redis
    from sqlalchemy import select

    from siliconbench.contract.jobs import JobSpec, digest
    from siliconbench.contract.queues import TASK_NOOP
    from siliconbench.contract.spec import parse_sweep

    from harness.fleet import WorkerProc, wait_for
    from siliconbench.storage import broker, database, jobstate, roles, sweep_store
    from siliconbench.storage.tables import Job

    r = redis.Redis.from_url(BROKER)
    r.flushdb()
    name = f"sb_plumbing_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    url = database.normalize_url(ADMIN).set(database=name).render_as_string(hide_password=False)
    database.upgrade(url)
    log_dir = Path(f"/tmp/{name}")
    log_dir.mkdir()
    models = log_dir / "models"
    models.mkdir()
    env = {"SILICONBENCH_WORKER_EXTRA_QUEUES": "cap.noop,raw.noop"}
    procs: list = []
    try:
        for i in range(workers):
            worker_url = url
            if login == "worker":
                worker_url = roles.create_login(
                    url, "worker", roles.login_for(f"plumb-{i}"), host=f"plumb-{i}"
                ).rendered()
            procs.append(
                WorkerProc(
                    f"plumb-{i}", broker=BROKER, database=worker_url, models_dir=models, log_dir=log_dir, env=env
                )
            )
        for p in procs:
            p.wait_ready()

        # --- raw Celery: the same number of no-op tasks on the same Redis and worker processes. Run before
        # and after the siliconbench phase: the shared machine's load drifts, so the ratio is taken to the
        # mean of the two (both are printed).
        from celery import Celery

        from siliconbench.contract.queues import celery_settings

        app = Celery("raw")
        app.conf.update(celery_settings(BROKER))

        def raw_celery() -> tuple[float, float]:
            t1 = time.perf_counter()
            with app.producer_or_acquire() as prod, prod.batch(max_size=500):
                for i in range(jobs):
                    app.send_task(
                        TASK_NOOP,
                        args=[i],
                        queue="raw.noop",
                        routing_key="raw.noop",
                        producer=prod,
                        argsrepr="",
                        kwargsrepr="",
                    )
            sent = time.perf_counter() - t1
            wait_for(
                lambda: r.llen("raw.noop") == 0 and r.hlen("unacked") == 0, timeout_s, every_s=0.05, what="raw drain"
            )
            return sent, jobs / (time.perf_counter() - t1)

        def backends() -> list[int]:  # the PostgreSQL server processes of this database (workers and ours)
            with psycopg.connect(ADMIN, autocommit=True) as c:
                return [pid for (pid,) in c.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [name])]

        def cpu() -> tuple[float, float]:  # CPU seconds so far: the worker processes, the database's backends
            return cpu_s([p.pid for p in procs]), cpu_s(backends())

        c0 = cpu()
        raw_before_enqueue, raw_before_tps = raw_celery()
        c1 = cpu()
        spies = []
        if profile is not None:  # py-spy on each worker's main process while the jobs run
            import subprocess

            profile.mkdir(parents=True, exist_ok=True)
            spies = [
                subprocess.Popen(
                    [
                        os.environ.get("PY_SPY", "py-spy"),
                        "record",
                        "--pid",
                        str(p.pid),
                        "--rate",
                        "250",
                        "--nonblocking",
                        "--format",
                        "raw",
                        "--output",
                        str(profile / f"{p.name}.txt"),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for p in procs
            ]
            time.sleep(1.0)
        # --- siliconbench: expand, store, enqueue (what `submit` does), then wait for every job
        spec = parse_sweep({"name": "plumbing", "models": ["noop"]})
        t0 = time.perf_counter()
        sweep_id = f"plumbing-{uuid.uuid4().hex[:6]}"
        template = dict(
            sweep_id=sweep_id,
            sweep_name="plumbing",
            model="noop",
            engine="llama.cpp",
            quant="none",
            quant_level="full",
            artifact="none",
            model_sha256="",
            workload="noop",
            n_gen=0,
            n_depth=0,
            repetitions=0,
            warmup=0,
            delay_s=0,
            seed=0,
            timeout_s=60,
            engine_options={},
        )
        specs = []
        for i in range(jobs):
            j = JobSpec(job_id="", index=i, n_prompt=i + 1, **template)
            j.job_id = digest({"sweep": sweep_id, **j.key()})
            specs.append(j)
        t_expand = time.perf_counter() - t0
        queue = "cap.noop"  # every plumbing worker consumes it (see below)
        with database.session_scope(url) as s:
            sweep_store.create_sweep(s, sweep_id, spec, specs)
            s.flush()
            jobstate.mark_enqueued(s, [j.job_id for j in specs], {j.job_id: queue for j in specs})
        t_store = time.perf_counter() - t0 - t_expand
        broker.enqueue(BROKER, [(j.job_id, queue, 0) for j in specs])
        t_enqueue = time.perf_counter() - t0

        def done() -> bool:
            with database.session_scope(url) as s:
                from sqlalchemy import func

                return (
                    s.scalar(select(func.count()).select_from(Job).where(Job.sweep_id == sweep_id, Job.status == "ok"))
                    == jobs
                )

        wait_for(done, timeout_s, every_s=0.5, what="every job")
        t_total = time.perf_counter() - t0
        c2 = cpu()
        for spy in spies:  # stopped by the PIDs we started (SIGINT: py-spy writes its output)
            import signal

            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        with database.session_scope(url) as s:
            rows = s.execute(
                select(Job.enqueued_at, Job.started_at, Job.finished_at).where(Job.sweep_id == sweep_id)
            ).all()
        lat = sorted((st - en).total_seconds() * 1000 for en, st, _ in rows)
        last = max(f for *_, f in rows)
        first = min(en for en, *_ in rows)
        sb_tps = jobs / (last - first).total_seconds()

        raw_after_enqueue, raw_after_tps = raw_celery()
        c3 = cpu()
    finally:
        for p in procs:
            p.stop()
        database.dispose(url)
        with psycopg.connect(ADMIN, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        r.flushdb()

    t = Table(
        title=f"plumbing: {jobs:,} no-engine jobs, {workers} worker processes, {os.cpu_count()} cores, {login} login"
    )
    for col in ("measure", "siliconbench", "raw Celery no-op", "ratio / target"):
        t.add_column(col, justify="right")
    t.add_row("expand (s)", f"{t_expand:.2f}", "", "")
    t.add_row("store in PostgreSQL (s)", f"{t_store:.2f}", "", "")
    t.add_row("send to Redis (s)", f"{t_enqueue - t_expand - t_store:.2f}", "", "")
    raw_tps = (raw_before_tps + raw_after_tps) / 2
    t.add_row(
        "expand + store + enqueue (s)",
        f"{t_enqueue:.2f}",
        f"{raw_before_enqueue:.2f} / {raw_after_enqueue:.2f} (enqueue only, before / after)",
        "target < 2 s",
    )
    t.add_row(
        "end-to-end jobs/s",
        f"{sb_tps:,.0f}",
        f"{raw_before_tps:,.0f} / {raw_after_tps:,.0f} (mean {raw_tps:,.0f})",
        f"{sb_tps / raw_tps:.2f}× (target ≥ 0.5×)",
    )
    t.add_row("dispatch latency p50 (ms)", f"{statistics.median(lat):,.0f}", "", "enqueue → claim")
    t.add_row("dispatch latency p99 (ms)", f"{lat[int(len(lat) * 0.99) - 1]:,.0f}", "", "")
    # CPU time per job, what a loaded machine's wall-clock figures hide: the workers' own, and PostgreSQL's
    # (the database's backends; ours also serve this script's polling every 0.5 s).
    per_job = lambda a, b, k: f"{(b[k] - a[k]) / jobs * 1000:.2f}"  # noqa: E731
    t.add_row(
        "worker CPU per job (ms)",
        per_job(c1, c2, 0),
        f"{per_job(c0, c1, 0)} / {per_job(c2, c3, 0)}",
        "all worker processes",
    )
    t.add_row(
        "PostgreSQL CPU per job (ms)",
        per_job(c1, c2, 1),
        f"{per_job(c0, c1, 1)} / {per_job(c2, c3, 1)}",
        "the database's backends",
    )
    t.add_row("wall, submit to last result (s)", f"{t_total:.1f}", "", "")
    console.print(t)
    return sb_tps, raw_tps


def cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of these processes so far (Linux /proc; a process gone counts 0)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of proc(5))
    return total / os.sysconf("SC_CLK_TCK")
