"""How fast are the dashboard's queries on a big database? 1,000,000 samples in a fresh PostgreSQL database.

    python benchmarks/dashboard_queries.py [--admin-url postgresql://postgres@127.0.0.1:5432/postgres]
                                           [--samples 1000000] [--runs 30] [--keep] [--database NAME]
                                           [--plans FILE]

Creates a database, migrates it, seeds a fleet's worth of sweeps with COPY (12 hosts, 4 models, both
engines, 3 quantizations, 3 prompt lengths x 2 depths, 5 repetitions + 1 warmup, ~2% failed jobs), then
times every query each page runs on a cache miss (the pages cache results until a new result arrives)
and prints p50/p95 per query. Target: p95 < 300 ms. The database is dropped afterwards unless --keep.
The seed (benchmarks/_dashboard_seed.py) fills every table as storing a result does, through the current schema.

--database NAME times an existing database (one kept with --keep; migrated to head first, which backfills
the summaries of one seeded before 0007) instead of seeding a new one. After the timings it prints each
query's plan summary from EXPLAIN (ANALYZE, BUFFERS): the top node, the indexes used and any sequential
scan; --plans FILE writes the full plans.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import typer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from benchmarks import _plans  # noqa: E402
from benchmarks._dashboard_seed import existing, seed  # noqa: E402
from siliconbench.coordinator.fleet import sweeps as fleet  # noqa: E402
from siliconbench.coordinator.reads import queries  # noqa: E402
from siliconbench.storage import database as db, sweep_store  # noqa: E402
from siliconbench.storage.database import session_scope  # noqa: E402

SWEEPS_SHOWN = 200  # = siliconbench.dashboard.data.SWEEPS_SHOWN (not imported: it would pull in Streamlit)


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
