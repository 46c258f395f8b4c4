"""How fast are the dashboard's queries on a big database? 1,000,000 samples in a fresh PostgreSQL database.

    python benchmarks/dashboard_queries.py [--admin-url postgresql://postgres@127.0.0.1:5432/postgres]
                                           [--samples 1000000] [--runs 30] [--keep] [--database NAME]
                                           [--plans FILE]

Creates a database, migrates it, seeds a fleet's worth of sweeps with COPY (12 hosts, 4 models, both
engines, 3 quantizations, 3 prompt lengths x 2 depths, 5 repetitions + 1 warmup, ~2% failed jobs), then
times every query each page runs on a cache miss (the pages cache results until a new result arrives)
and prints p50/p95 per query. Target: p95 < 300 ms. The database is dropped afterwards unless --keep.
The seed writes the per-result summaries with migration 0007's own backfill (loaded from its file).

--database NAME times an existing database (one kept with --keep; migrated to head first, which backfills
the summaries of one seeded before 0007) instead of seeding a new one. After the timings it prints each
query's plan summary from EXPLAIN (ANALYZE, BUFFERS): the top node, the indexes used and any sequential
scan; --plans FILE writes the full plans.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import statistics
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import typer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from siliconbench.contract.jobs import JobSpec, digest  # noqa: E402
from siliconbench.contract.results import Environment  # noqa: E402

from benchmarks import _plans  # noqa: E402
from siliconbench.coordinator.fleet import sweeps as fleet  # noqa: E402
from siliconbench.coordinator.reads import queries  # noqa: E402
from siliconbench.storage import database as db, sweep_store  # noqa: E402
from siliconbench.storage.database import session_scope  # noqa: E402

MODELS = ["tiny-llama-5m", "tiny-llama-30m", "smollm2-135m", "llama-3.2-1b"]
QUANTS = {
    "llama.cpp": [("F16", "full"), ("Q8_0", "q8"), ("Q4_K_M", "q4")],
    "mlx": [("f32", "full"), ("8bit", "q8"), ("4bit", "q4")],
}
METRICS = {
    "llama.cpp": ["prefill_tps", "decode_tps", "ttft_ms", "engine_prefill_tps", "engine_decode_tps"],
    "mlx": ["prefill_tps", "decode_tps", "ttft_ms", "mlx_peak_memory_bytes"],
}
CHIPS = ["Apple M1", "Apple M2 Pro", "Apple M2 Ultra", "Apple M3 Max", "Apple M4", "Apple M4 Pro"]
PROMPTS, DEPTHS, REPS, WARMUP = (128, 512, 2048), (0, 2048), 5, 1
T0 = datetime(2026, 6, 1, tzinfo=timezone.utc)
SWEEPS_SHOWN = 200  # = siliconbench.dashboard.data.SWEEPS_SHOWN (not imported: it would pull in Streamlit)


def environment(host: int, engine: str, new: bool) -> Environment:
    pkgs = (
        {"llama-cpp-python": "0.3.36" if new else "0.3.35"}
        if engine == "llama.cpp"
        else {"mlx": "0.32.4", "mlx-lm": "0.32.2" if new else "0.32.1"}
    )
    return Environment(
        hostname=f"mac-{host:02d}.local",
        os="Darwin",
        os_version="15.1 (24B83)",
        chip=CHIPS[host % len(CHIPS)],
        cores=12,
        memory_bytes=(32 << host % 3) * 2**30,
        machine="arm64",
        python="3.11.7",
        packages=pkgs,
        backend="Metal",
        engine_build={"ggml_commit": "0c1e570"} if engine == "llama.cpp" else {},
        engine_options={"threads": 12},
    )


def migration_0007():
    """Migration 0007, loaded from its file for its backfill: frozen, it names 0007's own columns, and it is what
    writes the summaries of results stored without them (siliconbench.storage.summaries has no backfill of its own)."""
    path = ROOT / "siliconbench" / "migrations" / "versions" / "0007_result_summaries.py"
    spec = importlib.util.spec_from_file_location("migration_0007", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seed(url: str, n_samples: int) -> dict:
    """COPY sweeps, jobs, results, samples and hosts; returns what the timed queries filter on."""
    import psycopg

    rnd = random.Random(0)
    u = db.normalize_url(url)
    info = dict(host=u.host, port=u.port or 5432, user=u.username, password=u.password, dbname=u.database)
    sweeps, jobs, samples = [], [], []
    t = T0
    while len(samples) < n_samples:
        i = len(sweeps)
        host, new = i % 12, i > 250
        sid, models = f"sweep{i:04d}-{uuid.UUID(int=rnd.getrandbits(128)).hex[:8]}", rnd.sample(MODELS, 2)
        t += timedelta(minutes=37)
        n0 = len(jobs)
        for model in models:
            for qi, p, d in ((qi, p, d) for qi in range(3) for p in PROMPTS for d in DEPTHS):
                for engine in ("llama.cpp", "mlx"):
                    quant, level = QUANTS[engine][qi]
                    j = JobSpec(
                        job_id="",
                        sweep_id=sid,
                        sweep_name=f"sweep{i}",
                        index=len(jobs) - n0,
                        model=model,
                        engine=engine,
                        quant=quant,
                        quant_level=level,
                        artifact=f"{model}/{quant}",
                        model_sha256=digest(model + quant, 64),
                        n_prompt=p,
                        n_gen=128,
                        n_depth=d,
                        repetitions=REPS,
                        warmup=WARMUP,
                        delay_s=0.0,
                        seed=0,
                        timeout_s=900,
                        engine_options={"threads": None},
                    )
                    j.job_id = digest({"sweep": sid, **j.key()})
                    ok = rnd.random() > 0.02
                    jobs.append((j, host, environment(host, engine, new), t, ok))
                    if not ok:
                        continue
                    base = (3000 if engine == "llama.cpp" else 2200) / (1 + MODELS.index(model)) / (1 + qi * 0.1)
                    samples += [
                        (j.job_id, rep, rep < WARMUP, m, base * rnd.uniform(0.9, 1.1))
                        for rep in range(WARMUP + REPS)
                        for m in METRICS[engine]
                    ]
        sweeps.append((sid, f"sweep{i}", t, len(jobs) - n0))
    with psycopg.connect(**info) as conn, conn.cursor() as cur:  # one transaction, committed on exit
        with cur.copy("COPY sweeps (id, name, spec, created_at, status, n_jobs) FROM STDIN") as cp:
            for sid, name, when, n in sweeps:
                cp.write_row((sid, name, json.dumps({"name": name, "models": MODELS[:2]}), when, "done", n))
        with cur.copy(
            "COPY jobs (id, sweep_id, idx, spec, model, engine, quant, quant_level, workload, n_prompt, "
            "n_gen, n_depth, repetitions, model_sha256, status, attempts, host, worker, created_at, "
            "started_at, finished_at) FROM STDIN"
        ) as cp:
            for j, host, _, when, ok in jobs:
                cp.write_row(
                    (
                        j.job_id,
                        j.sweep_id,
                        j.index,
                        j.model_dump_json(),
                        j.model,
                        j.engine,
                        j.quant,
                        j.quant_level,
                        j.workload,
                        j.n_prompt,
                        j.n_gen,
                        j.n_depth,
                        j.repetitions,
                        j.model_sha256,
                        "ok" if ok else "failed",
                        1,
                        f"mac-{host:02d}.local",
                        f"w{host:02d}",
                        when,
                        when,
                        when,
                    )
                )
        with cur.copy(
            "COPY results (job_id, status, error, stderr_tail, started_at, finished_at, wall_s, load_s, "
            "peak_memory_bytes, baseline_memory_bytes, hostname, chip, identity_hash, environment, extra, "
            "created_at, engine_version) FROM STDIN"
        ) as cp:
            for j, _, env, when, ok in jobs:
                cp.write_row(
                    (
                        j.job_id,
                        "ok" if ok else "failed",
                        None if ok else "engine error: out of memory",
                        None if ok else "error: out of memory\n",
                        when,
                        when,
                        rnd.uniform(5, 60),
                        0.4,
                        rnd.randint(2**29, 2**33),
                        2**26,
                        env.hostname,
                        env.chip,
                        digest({"job": j.key(), "env": env.identity()}),
                        env.model_dump_json(),
                        "{}",
                        when,
                        env.engine_version(j.engine),
                    )
                )
        with cur.copy(
            "COPY hosts (name, hostname, chip, memory_bytes, os, info, engines, models, online, "
            "last_heartbeat, current_job_id) FROM STDIN"
        ) as cp:
            for h in range(12):
                cp.write_row(
                    (
                        f"w{h:02d}",
                        f"mac-{h:02d}.local",
                        CHIPS[h % len(CHIPS)],
                        (32 << h % 3) * 2**30,
                        "Darwin",
                        "{}",
                        json.dumps([{"name": "llama.cpp", "version": "0.3.36"}, {"name": "mlx", "version": "0.32.2"}]),
                        json.dumps([{"name": m, "artifacts": []} for m in MODELS]),
                        h % 4 != 0,
                        datetime.now(timezone.utc) - timedelta(seconds=h),
                        None,
                    )
                )
        with cur.copy("COPY samples (job_id, repetition, warmup, metric, value) FROM STDIN") as cp:
            for row in samples:
                cp.write_row(row)
    with psycopg.connect(**info, autocommit=True) as conn:
        conn.execute("ANALYZE")  # statistics first, or the backfill's join is planned for empty tables
    with session_scope(url) as session:  # the summaries, as save_result writes them (and 0007 backfills them)
        migration_0007().backfill(session.connection())
    with psycopg.connect(**info, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")  # as autovacuum would after a bulk load: statistics, visibility map
    j0 = jobs[-1][0]
    return {
        "sweeps": len(sweeps),
        "jobs": len(jobs),
        "samples": len(samples),
        "latest": sweeps[-1][0],
        "model": j0.model,
        "host": f"mac-{jobs[-1][1]:02d}.local",
        "job": j0.job_id,
        "plan": [x[0] for x in jobs[-72:]],
    }


def existing(url: str) -> dict:
    """What the timed queries filter on, read back from a database seeded before (--database)."""
    from sqlalchemy import func, select

    from siliconbench.contract.jobs import JobSpec as Spec

    from siliconbench.storage.tables import Job, SampleRow, Sweep

    with session_scope(url) as x:
        latest = sweep_store.latest_sweep_id(x)
        specs = list(x.execute(select(Job.spec, Job.host).order_by(Job.created_at.desc(), Job.idx.desc()).limit(72)))
        plan = [Spec.model_validate(spec) for spec, _ in reversed(specs)]
        n = {t.__tablename__: x.scalar(select(func.count()).select_from(t)) for t in (Sweep, Job, SampleRow)}
    return {
        "sweeps": n["sweeps"],
        "jobs": n["jobs"],
        "samples": n["samples"],
        "latest": latest,
        "model": plan[-1].model,
        "host": specs[0][1],
        "job": plan[-1].job_id,
        "plan": plan,
    }


def timed(fn, runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    q = statistics.quantiles(times, n=20, method="inclusive")
    return statistics.median(times), q[18]


def main(
    admin_url: str = typer.Option(
        os.environ.get("SILICONBENCH_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    ),
    samples: int = 1_000_000,
    runs: int = 30,
    keep: bool = False,
    database: str = typer.Option(None, help="Time this existing database (migrated to head) instead of seeding"),
    plans: Path = typer.Option(None, help="Write every query's full EXPLAIN (ANALYZE, BUFFERS) plans here"),
) -> None:
    import psycopg

    admin = db.normalize_url(admin_url)
    name = database or f"siliconbench_dashbench_{os.getpid()}"
    keep = keep or database is not None  # never drop a database this run did not create
    info = dict(
        host=admin.host,
        port=admin.port or 5432,
        user=admin.username,
        password=admin.password,
        dbname=admin.database,
        autocommit=True,
    )
    if database is None:
        with psycopg.connect(**info) as c:
            c.execute(f'CREATE DATABASE "{name}"')
    url = admin.set(database=name).render_as_string(hide_password=False)
    try:
        t0 = time.perf_counter()
        db.upgrade(url)
        if database is None:
            s = seed(url, samples)
            print(
                f"seeded {s['samples']:,} samples, {s['jobs']:,} jobs, {s['sweeps']} sweeps in "
                f"{time.perf_counter() - t0:.1f} s (revision {db.current_revision(url)})"
            )
        else:
            s = existing(url)
            print(
                f"database {name}: {s['samples']:,} samples, {s['jobs']:,} jobs, {s['sweeps']} sweeps "
                f"(revision {db.current_revision(url)}, migrated in {time.perf_counter() - t0:.1f} s)"
            )
        F = queries.Filters
        latest, one_host = F(sweeps=(s["latest"],)), F(models=(s["model"],), hosts=(s["host"],))
        all_hosts = F(models=(s["model"],))
        with session_scope(url) as session:
            latest_ids = [r["identity_hash"] for r in queries.series(session, latest)[0]]

        def compare_view(x):  # what the Compare page runs on a cache miss, default filters
            queries.data_version(x), queries.filter_options(x), queries.series(x, latest)
            queries.raw_samples(x, latest, "prefill_tps", identities=latest_ids), queries.failed_results(x, latest)

        def sweeps_view(x):  # is anything live, the list, and a preview's estimate
            (
                queries.active_sweeps(x),
                sweep_store.list_sweeps(x, limit=SWEEPS_SHOWN),
                queries.estimate_duration(x, s["plan"]),
            )

        def result_view(x):
            queries.data_version(x), queries.recent_results(x), queries.result_detail(x, s["job"])

        cases = {
            "compare: data_version": lambda x: queries.data_version(x),
            "compare: filter_options": lambda x: queries.filter_options(x),
            "compare: series (latest sweep, default)": lambda x: queries.series(x, latest),
            "compare: raw_samples (latest sweep)": lambda x: queries.raw_samples(
                x, latest, "prefill_tps", identities=latest_ids
            ),
            "compare: failed_results (latest sweep)": lambda x: queries.failed_results(x, latest),
            "compare: series (1 model, 1 host, all sweeps)": lambda x: queries.series(x, one_host),
            "compare: series (1 model, all hosts)": lambda x: queries.series(x, all_hosts),
            "compare: series (1 model, all hosts, v0.3.36)": lambda x: queries.series(
                x, F(models=(s["model"],), engine_versions=("0.3.36",))
            ),
            f"compare: series (no filter: newest {queries.MAX_SERIES})": lambda x: queries.series(x, F()),
            f"sweeps: list_sweeps (newest {SWEEPS_SHOWN} + live)": lambda x: sweep_store.list_sweeps(
                x, limit=SWEEPS_SHOWN
            ),
            "sweeps: estimate_duration (72-job plan)": lambda x: queries.estimate_duration(x, s["plan"]),
            "fleet: list_hosts": lambda x: fleet.list_hosts(x),
            "result: recent_results": lambda x: queries.recent_results(x),
            "result: result_detail": lambda x: queries.result_detail(x, s["job"]),
            "PAGE compare (default view, all its queries)": compare_view,
            "PAGE sweeps (active + list + preview estimate)": sweeps_view,
            "PAGE fleet (list_hosts)": lambda x: fleet.list_hosts(x),
            "PAGE result (version + picker + detail)": result_view,
        }
        print(f"\n{'query':<50} {'p50 ms':>8} {'p95 ms':>8}  (runs={runs})")
        with session_scope(url) as session:
            for label, fn in cases.items():
                fn(session)  # warm the pool and the plan cache, as a running dashboard would be
                p50, p95 = timed(lambda: fn(session), runs)
                flag = "" if p95 < 300 else "  over 300 ms"
                print(f"{label:<50} {p50:>8.1f} {p95:>8.1f}{flag}")
        print("\nplans (EXPLAIN ANALYZE, BUFFERS) of each query's statements:")
        full = []
        with session_scope(url) as session:
            for label, fn in cases.items():
                if label.startswith("PAGE"):
                    continue  # a page is the queries above
                with _plans.capture(session) as sent:
                    fn(session)
                for i, (statement, params) in enumerate(sent):
                    plan = _plans.explain(session, statement, params)
                    print(f"  {label} [{i + 1}/{len(sent)}]: {_plans.summary(plan)}")
                    full.append({"query": label, "statement": statement, "plan": plan})
        if plans:
            plans.write_text(json.dumps(full, indent=1, default=str))
            print(f"full plans in {plans}")
    finally:
        db.dispose(url)
        if not keep:
            with psycopg.connect(**info) as c:
                c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    typer.run(main)
