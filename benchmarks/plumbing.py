"""What the service's own bookkeeping costs: 10,000 no-engine jobs through the real stack, side by
side with a raw Celery no-op task on the same Redis.

    python benchmarks/plumbing.py [--jobs 10000] [--workers 2] [--login worker|owner] [--rounds 1]

Workers run on their own least-privilege logins (`--login worker`, as a fleet should: row-level security on
every claim and result write), or on the database owner's (`--login owner`, the cost without it).

Needs PostgreSQL and Redis on 127.0.0.1 (a fresh database and Redis db 7 are used and removed).
Prints: time to expand + store + enqueue, end-to-end jobs/s, dispatch latency p50/p99 (enqueue to
claim, from the jobs table), and the raw Celery figures, measured before and after the siliconbench
phase on the same worker processes (the ratio is to their mean: the load of a shared machine drifts). Targets: enqueue < 2 s; >= 0.5x raw throughput.
With ``--rounds N`` it runs N such rounds (each raw / siliconbench / raw, fresh database and workers) and
prints each round's ratio and their median beside the earlier figures (REFERENCES).

``--profile DIR`` samples each siliconbench worker with py-spy (``PY_SPY``, default ``py-spy`` on PATH)
during the siliconbench phase of the first round and writes each worker's collapsed stacks there (``--format raw``:
one line per stack and its sample count, what flame graph tools read).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BROKER = "redis://127.0.0.1:6379/7"
# Earlier figures of this benchmark on this project's 2-core VM (end-to-end jobs/s, ours vs raw Celery no-ops).
REFERENCES = [
    ("before aa68511: synchronous claim", 288, 1_196),
    ("aa68511: asynchronous claim (median of 3)", 419, 1_042),
    ("3ca7ee6: prepared claim and result, every result durable (median of 6, a quieter day)", 700, 1_800),
]
ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def main(
    jobs: int = 10_000,
    workers: int = 2,
    timeout_s: float = 900,
    login: str = typer.Option("worker", help="worker: each worker on its own worker login; owner: the owner's"),
    rounds: int = typer.Option(1, help="rounds, each raw / siliconbench / raw; their median is printed"),
    profile: Path = typer.Option(None, help="py-spy samples of the workers (first round) into this folder"),
) -> None:
    console = Console()
    figures = []
    for n in range(rounds):
        figures.append(one_round(console, jobs, workers, timeout_s, login, profile if n == 0 else None))
        if rounds > 1:
            f = figures[-1]
            console.print(
                f"round {n + 1}/{rounds}: siliconbench {f[0]:,.0f} jobs/s, raw Celery {f[1]:,.0f} jobs/s, "
                f"{f[0] / f[1]:.2f}×"
            )
    t = Table(
        title=f"end-to-end jobs/s, ours vs raw Celery no-ops on the same workers ({os.cpu_count()} cores, "
        f"a shared machine: single rounds vary ±10-20%)"
    )
    for col in ("", "siliconbench", "raw Celery", "ratio"):
        t.add_column(col, justify="right")
    for what, ours, raw in REFERENCES:
        t.add_row(what, f"{ours:,}", f"{raw:,}", f"{ours / raw:.2f}×")
    for n, (ours, raw) in enumerate(figures):
        t.add_row(f"this run, round {n + 1}", f"{ours:,.0f}", f"{raw:,.0f}", f"{ours / raw:.2f}×")
    ratios = [ours / raw for ours, raw in figures]
    t.add_row(
        f"this run, median of {len(figures)}",
        f"{statistics.median(o for o, _ in figures):,.0f}",
        f"{statistics.median(r for _, r in figures):,.0f}",
        f"{statistics.median(ratios):.2f}× (target ≥ 0.5×)",
    )
    console.print(t)


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


if __name__ == "__main__":
    typer.run(main)
