"""The storage layer against real databases: a SQLite file and a real PostgreSQL server.

PostgreSQL tests run in a database created for this test session and dropped after it. They are
skipped when no server answers, unless CI=true: then they fail, so CI cannot pass without them.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import func, inspect, select, text

from siliconbench.contract.aggregate import stability_warnings, summarize
from siliconbench.contract.errors import UserError
from siliconbench.contract.results import JobResult, JobStatus
from siliconbench.contract.spec import SweepSpec

from siliconbench.coordinator.reads import queries
from siliconbench.coordinator.reports.export import RECORD_KEYS, load_records, result_record, to_csv_rows
from siliconbench.storage import (
    database as db,
    result_store,
    sweep_store,
    watch_tables,  # noqa: F401  (the watch's tables are on Base.metadata too)
)
from siliconbench.storage.tables import Base, Job, Result, SampleRow, Sweep
from tests.conftest import new_pg_database
from tests.storage.records import JOBS, SPEC, SWEEP_ID, make_job, make_result

ROOT = Path(__file__).resolve().parents[2]
TABLES = {
    "sweeps",
    "jobs",
    "results",
    "samples",
    "hosts",
    "findings",
    "job_attempts",
    "worker_logins",
    "result_summaries",
    "result_identities",
    "watches",
    "watch_checks",
    "watch_versions",
    "campaigns",
    "campaign_hosts",
    "suspect_hosts",
    "notifications",
    "fleet_models",
    "bisections",
    "user_files",
    "user_file_chunks",
}
PG_ADMIN_URL = os.environ.get("SILICONBENCH_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


# ----------------------------------------------------------------------------------------- databases


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request, tmp_path):
    """A database with no tables: a new SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'storage.sqlite'}"
        yield url
        db.dispose(url)
        return
    with new_pg_database("sb_storage") as url:
        assert not inspect(db.engine_for(url)).get_table_names()
        yield url


@pytest.fixture
def url(empty_db):
    """A database at the head revision, SQLite and PostgreSQL (conftest.empty_db: a copy of the run's template)."""
    return empty_db


def tables(url: str) -> set[str]:
    db.dispose(url)  # a fresh inspector sees the schema as it is now
    return set(inspect(db.engine_for(url)).get_table_names())


# ---------------------------------------------------------------------------------- realistic objects


def count(url: str, model) -> int:
    with db.session_scope(url) as s:
        return s.scalar(select(func.count()).select_from(model))


def n_values(result: JobResult) -> int:
    return sum(len(s.values) for s in result.samples)


# ---------------------------------------------------------------------------------------- migrations


def test_head_is_the_newest_migration_script():
    """storage.database.HEAD spares every process alembic; a new migration must move it (and this says to which)."""
    from alembic.script import ScriptDirectory

    newest = ScriptDirectory.from_config(db.alembic_config("sqlite://")).get_current_head()
    assert db.HEAD == newest, f"a migration was added: set HEAD = {newest!r} in siliconbench/storage/database.py"
    assert db.HEAD in db.known_revisions()


def test_migrations_up_down_up(empty_url):
    head = db.head_revision()
    assert head and db.current_revision(empty_url) is None
    db.upgrade(empty_url)
    assert db.current_revision(empty_url) == head
    assert tables(empty_url) == TABLES | {"alembic_version"}
    insp = inspect(db.engine_for(empty_url))
    assert {i["name"] for i in insp.get_indexes("jobs")} == {i.name for i in Job.__table__.indexes}
    assert {i["name"] for i in insp.get_indexes("samples")} == {"ix_samples_job_id_metric"}
    assert {i["name"] for i in insp.get_indexes("results")} == {i.name for i in Result.__table__.indexes}

    # The migration and the models describe the same schema (autogenerate would produce nothing).
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with db.engine_for(empty_url).connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata) == []

    db.downgrade(empty_url, "base")
    assert db.current_revision(empty_url) is None
    assert tables(empty_url) == set()
    if empty_url.startswith("postgresql"):
        with db.engine_for(empty_url).connect() as conn:
            leftovers = (
                conn.execute(
                    text(
                        "SELECT t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
                        "WHERE n.nspname = 'public' UNION ALL "
                        "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE n.nspname = 'public'"
                    )
                )
                .scalars()
                .all()
            )
        assert leftovers == []

    db.upgrade(empty_url)
    assert tables(empty_url) == TABLES | {"alembic_version"} and db.current_revision(empty_url) == head


def test_require_current_raises_until_upgraded(empty_url):
    with pytest.raises(UserError) as err:
        db.require_current(empty_url)
    assert err.value.field == "SILICONBENCH_DATABASE_URL" and "siliconbench db upgrade" in err.value.message
    db.upgrade(empty_url)
    db.require_current(empty_url)


def test_ready_migrates_sqlite_on_first_use_and_leaves_postgresql_to_db_upgrade(empty_url):
    if empty_url.startswith("sqlite"):
        db.ready(empty_url)  # the embedded database, wherever its file lives
        assert db.current_revision(empty_url) == db.head_revision()
    else:
        with pytest.raises(UserError) as err:
            db.ready(empty_url)
        assert "siliconbench db upgrade" in err.value.message and db.current_revision(empty_url) is None


def test_require_current_names_an_unreachable_database():
    with pytest.raises(UserError) as err:
        db.require_current("postgresql://nobody:secret@127.0.0.1:1/none")
    assert err.value.field == "SILICONBENCH_DATABASE_URL" and "secret" not in str(err.value)


def test_postgres_urls_mean_psycopg():
    assert db.normalize_url("postgresql://u@h/d").drivername == "postgresql+psycopg"
    assert db.normalize_url("postgres://u@h/d").drivername == "postgresql+psycopg"
    assert db.engine_for("sqlite://") is db.engine_for("sqlite://")


def test_only_migrations_create_tables():
    offenders = [
        str(p.relative_to(ROOT))
        for d in ("siliconbench", "coordinator", "worker", "dashboard", "migrations")
        for p in (ROOT / d).rglob("*.py")
        if "create_all(" in p.read_text()
    ]
    assert offenders == []


# ------------------------------------------------------------------------------------- reads, writes


def test_create_sweep_and_round_trip(url):
    with db.session_scope(url) as s:
        sweep_store.create_sweep(s, SWEEP_ID, SPEC, JOBS)
    with db.session_scope(url) as s:
        assert sweep_store.sweep_progress(s, SWEEP_ID) == {
            "queued": 4,
            "running": 0,
            "ok": 0,
            "failed": 0,
            "cancelled": 0,
        }
        assert sweep_store.mark_running(s, JOBS[0].job_id, host="studio-01", worker="studio-01/w1", lease_s=60)
        assert s.get(Sweep, SWEEP_ID).status == "running"
        job = s.get(Job, JOBS[0].job_id)
        assert (job.status, job.attempts, job.host) == ("running", 1, "studio-01")
        assert job.lease_expires_at.tzinfo is not None and job.lease_expires_at > job.started_at
        assert SweepSpec.model_validate(s.get(Sweep, SWEEP_ID).spec) == SPEC
        assert [j.job_id for j in sweep_store.pending_jobs(s, SWEEP_ID)] == [j.job_id for j in JOBS]
    results = {j.job_id: make_result(j) for j in JOBS[:3]}
    for j in JOBS[:3]:
        with db.session_scope(url) as s:
            assert result_store.save_result(s, j, results[j.job_id], host="studio-01", worker="studio-01/w1")
    assert count(url, SampleRow) == sum(n_values(r) for r in results.values())

    with db.session_scope(url) as s:
        loaded = result_store.load_results(s, sweep_id=SWEEP_ID)
        assert [j.job_id for j, _ in loaded] == [j.job_id for j in JOBS[:3]]  # run order
        for job, result in loaded:
            assert job == next(j for j in JOBS if j.job_id == job.job_id)
            assert result.model_dump() == results[job.job_id].model_dump()  # samples, floats, tz-aware times
            assert result.finished_at.tzinfo is not None
        assert [j.job_id for j, _ in result_store.load_results(s, job_ids=[JOBS[2].job_id])] == [JOBS[2].job_id]
        assert len(result_store.load_results(s)) == 3
        job = s.get(Job, JOBS[0].job_id)
        assert (job.status, job.worker, job.lease_expires_at) == ("ok", "studio-01/w1", None)
        assert job.finished_at == results[JOBS[0].job_id].finished_at
        row = s.get(Result, JOBS[1].job_id)
        assert (row.hostname, row.chip) == ("mac-studio-01.local", "Apple M2 Ultra")
        assert row.identity_hash == results[JOBS[1].job_id].identity_hash(JOBS[1])
        assert sweep_store.sweep_progress(s, SWEEP_ID)["ok"] == 3
        assert [p.job_id for p in sweep_store.pending_jobs(s, SWEEP_ID)] == [JOBS[3].job_id]
        assert sweep_store.refresh_sweep_status(s, SWEEP_ID) == "running"
        assert not sweep_store.mark_running(s, JOBS[0].job_id, host="other", worker="other/w1")  # final stays final
        assert sweep_store.latest_sweep_id(s) == SWEEP_ID
        (listed,) = sweep_store.list_sweeps(s)
        assert (listed["id"], listed["name"], listed["n_jobs"], listed["jobs"]["ok"]) == (SWEEP_ID, "quickstart", 4, 3)

    with db.session_scope(url) as s, pytest.raises(UserError) as err:
        sweep_store.create_sweep(s, SWEEP_ID, SPEC, JOBS)
    assert err.value.field == "sweep"
    with db.session_scope(url) as s, pytest.raises(UserError):
        sweep_store.sweep_progress(s, "nope-000000000000")


def test_save_result_is_idempotent(url):
    with db.session_scope(url) as s:
        sweep_store.create_sweep(s, SWEEP_ID, SPEC, JOBS)
    job, result = JOBS[0], make_result(JOBS[0])
    with db.session_scope(url) as s:
        assert result_store.save_result(s, job, result, host="studio-01", worker="w1") is True
    n = count(url, SampleRow)
    assert n == n_values(result)
    again = make_result(job, noisy=True).model_copy(update={"status": JobStatus.failed, "error": "late duplicate"})
    with db.session_scope(url) as s:
        assert result_store.save_result(s, job, again, host="studio-02", worker="w9") is False
    assert (count(url, Result), count(url, SampleRow)) == (1, n)
    with db.session_scope(url) as s:
        ((_, stored),) = result_store.load_results(s, job_ids=[job.job_id])
        assert stored.model_dump() == result.model_dump()
        assert (s.get(Job, job.job_id).status, s.get(Job, job.job_id).host) == ("ok", "studio-01")


def test_save_result_for_an_unknown_job(url):
    with db.session_scope(url) as s, pytest.raises(result_store.UnknownJob):
        result_store.save_result(s, JOBS[0], make_result(JOBS[0]))
    assert count(url, Result) == 0


def test_failed_result_without_environment(url):
    with db.session_scope(url) as s:
        sweep_store.create_sweep(s, SWEEP_ID, SPEC, JOBS)
    bad = JobResult(
        job_id=JOBS[1].job_id, status=JobStatus.failed, error="child exited with signal 9", stderr_tail="Killed\n"
    )
    with db.session_scope(url) as s:
        assert result_store.save_result(s, JOBS[1], bad)
    with db.session_scope(url) as s:
        ((job, back),) = result_store.load_results(s, sweep_id=SWEEP_ID)
        assert back.model_dump() == bad.model_dump() and s.get(Job, job.job_id).error == bad.error
    rec = result_record(job, back)
    assert rec["status"] == "failed" and rec["prefill_tps"] is None and rec["engine_counters"] == {}
    assert rec["host"] == dict.fromkeys(("hostname", "os", "chip", "cores", "memory_bytes"))


@pytest.mark.parametrize("rounds", [12])
def test_concurrent_save_result_stores_one(url, rounds):
    """Two writers racing on each job (a redelivered job, two workers): exactly one result is stored."""
    pg_url = url
    jobs = [make_job("llama.cpp", i, n_prompt=64 + i) for i in range(rounds)]
    with db.session_scope(pg_url) as s:
        sweep_store.create_sweep(s, SWEEP_ID, SPEC, jobs)
    for job in jobs:
        barrier, outcomes, errors = threading.Barrier(2), [], []

        def write(worker: str, job=job) -> None:
            try:
                barrier.wait()
                with db.session_scope(pg_url) as s:
                    outcomes.append(result_store.save_result(s, job, make_result(job), host=worker, worker=worker))
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(w,)) for w in ("w1", "w2")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors and sorted(outcomes) == [False, True]
    assert count(pg_url, Result) == rounds
    assert count(pg_url, SampleRow) == rounds * n_values(make_result(jobs[0]))


# -------------------------------------------------------------------------------------------- export


def test_export_record_contract(url):
    with db.session_scope(url) as s:
        sweep_store.create_sweep(s, SWEEP_ID, SPEC, JOBS)
    results = [make_result(JOBS[0], noisy=True), make_result(JOBS[1])]
    with db.session_scope(url) as s:
        for j, r in zip(JOBS, results, strict=False):  # the first two of the four jobs
            result_store.save_result(s, j, r, host="studio-01", worker=f"studio-01/{j.engine}")
    with db.session_scope(url) as s:
        records = load_records(s, sweep_id=SWEEP_ID)
        pairs = result_store.load_results(s, sweep_id=SWEEP_ID)
    assert [r["job_id"] for r in records] == [JOBS[0].job_id, JOBS[1].job_id]
    for rec, (job, result) in zip(records, pairs, strict=True):
        assert list(rec) == list(RECORD_KEYS) and set(rec) == {
            "job_id",
            "sweep",
            "sweep_id",
            "status",
            "error",
            "engine",
            "engine_version",
            "commit",
            "backend",
            "model",
            "quant",
            "quant_level",
            "workload",
            "n_prompt",
            "n_gen",
            "n_depth",
            "repetitions",
            "process",
            "prefill_tps",
            "decode_tps",
            "ttft_ms",
            "load_s",
            "peak_memory_bytes",
            "host",
            "created_at",
            "worker",
            "warmup_samples",
            "environment",
            "identity_hash",
            "engine_counters",
            "unstable",
            "stderr_tail",
            "params",
            "metrics",
            "extra",
        }
        assert (
            result_record(job, result, worker=rec["worker"], created_at=datetime.fromisoformat(rec["created_at"]))
            == rec
        )
        for m in ("prefill_tps", "decode_tps", "ttft_ms"):
            s = summarize([x.values[m] for x in result.samples if not x.warmup])
            assert rec[m] == {
                "mean": s.mean,
                "median": s.median,
                "stddev": s.stddev,
                "min": s.min,
                "max": s.max,
                "samples": s.samples,
            }
            assert len(rec[m]["samples"]) == job.repetitions  # warmup excluded
        assert rec["warmup_samples"] == [x.model_dump(mode="json") for x in result.samples if x.warmup]
        assert rec["sweep"] == "quickstart" and rec["sweep_id"] == SWEEP_ID and rec["status"] == "ok"
        assert rec["host"] == {
            "hostname": "mac-studio-01.local",
            "os": "Darwin",
            "chip": "Apple M2 Ultra",
            "cores": 24,
            "memory_bytes": 192 * 2**30,
        }
        assert rec["backend"] == "Metal" and rec["worker"] == f"studio-01/{job.engine}"
        assert datetime.fromisoformat(rec["created_at"]).tzinfo is not None
        assert rec["identity_hash"] == result.identity_hash(job) and rec["environment"]["chip"] == "Apple M2 Ultra"
    llama, mlx = records
    assert (llama["engine_version"], mlx["engine_version"]) == ("0.3.36", "0.32.2")
    assert set(llama["engine_counters"]) == {"engine_prefill_tps", "engine_decode_tps"} and mlx["engine_counters"] == {}
    assert (
        llama["engine_counters"]["engine_decode_tps"]["mean"]
        == summarize(pairs[0][1].measured("engine_decode_tps")).mean
    )
    expected = stability_warnings(
        {
            m: pairs[0][1].summary(m)
            for m in ("prefill_tps", "decode_tps", "ttft_ms", "engine_prefill_tps", "engine_decode_tps")
        }
    )
    assert llama["unstable"] == expected and expected and mlx["unstable"] == []

    rows = to_csv_rows(records)
    assert len(rows) == 2 and list(rows[0]) == list(rows[1])
    assert rows[0]["decode_tps_mean"] == llama["decode_tps"]["mean"] and rows[0]["decode_tps_n"] == 3
    assert rows[1]["engine_decode_tps_mean"] is None and rows[0]["host_chip"] == "Apple M2 Ultra"


def test_status_checks_follow_the_contract():
    """The CHECK constraints list JobStatus's values: a new status needs a migration, and this test says so."""
    from siliconbench.storage.tables import JOB_STATUSES, RESULT_STATUSES

    assert set(JOB_STATUSES) == {s.value for s in JobStatus}
    assert set(RESULT_STATUSES) <= set(JOB_STATUSES) - {"queued", "running"}


def test_a_throttled_result_is_kept_but_left_out_of_compare_by_default(url):
    """Both stored with their thermal record and footprint; Compare's default view pools only the cool one."""
    with db.session_scope(url) as s:
        sweep_store.create_sweep(s, SWEEP_ID, SPEC, JOBS)
    cool, hot = make_result(JOBS[0]), make_result(JOBS[2])
    hot.extra["thermal"] = {"mode": "wait", "throttled": True, "start": {"thermal_state": "throttled"}}
    cool.extra["thermal"] = {"mode": "wait", "throttled": False, "start": {"thermal_state": "nominal"}}
    cool.peak_footprint_bytes, cool.baseline_footprint_bytes = 734_003_200, 52_428_800
    with db.session_scope(url) as s:
        result_store.save_result(s, JOBS[0], cool)
        result_store.save_result(s, JOBS[2], hot)
    with db.session_scope(url) as s:
        default, n_default = queries.series(s, queries.Filters(engines=("llama.cpp",)))
        everything, n_all = queries.series(s, queries.Filters(engines=("llama.cpp",), include_disturbed=True))
        stored = {x.job.job_id: x.result for x in result_store.load_stored(s, SWEEP_ID)}
    assert (n_default, n_all) == (1, 2) and default[0]["n_prompt"] == 512
    assert stored[JOBS[2].job_id].throttled is True and stored[JOBS[0].job_id].throttled is False
    assert (stored[JOBS[0].job_id].peak_footprint_bytes, stored[JOBS[0].job_id].baseline_footprint_bytes) == (
        734_003_200,
        52_428_800,
    )


def test_compare_filters_by_mac_model_and_gpu_cores(url):
    """Binned chips differ only in GPU cores: the filter options offer the stored values, and each narrows."""
    with db.session_scope(url) as s:
        sweep_store.create_sweep(s, SWEEP_ID, SPEC, JOBS)
    for job, model, cores in ((JOBS[0], "Mac16,11", 16), (JOBS[2], "Mac16,11", 20)):
        r = make_result(job)
        r.environment.host_details = {"model": model, "gpu_cores": cores, "chip": "Apple M4 Pro"}
        with db.session_scope(url) as s:
            result_store.save_result(s, job, r)
    with db.session_scope(url) as s:
        opts = queries.filter_options(s)
        by_cores = queries.series(s, queries.Filters(gpu_cores=(20,)))[0]
        by_model = queries.series(s, queries.Filters(mac_models=("Mac16,11",)))[1]
    assert opts["mac_models"] == ["Mac16,11"] and opts["gpu_cores"] == [16, 20]
    assert [r["n_prompt"] for r in by_cores] == [128] and by_model == 2


def test_migration_0012_renames_the_gates_verdict_column_and_the_busy_record(url):
    """results.throttled held "throttled or contended" and the busy gate's record was extra.contention: 0012 names
    them disturbed and extra.busy, keeping every stored value, and its downgrade gives the old names back."""
    with db.session_scope(url) as s:
        sweep_store.create_sweep(s, SWEEP_ID, SPEC, JOBS)
    busy = make_result(JOBS[0])
    busy.extra["busy"] = {"mode": "wait", "contended": True, "why": ["other processes used 80% of the cores"]}
    with db.session_scope(url) as s:
        result_store.save_result(s, JOBS[0], busy)

    def row(column: str) -> tuple:
        with db.engine_for(url).connect() as conn:
            flag, extra = conn.execute(
                text(f"SELECT {column}, extra FROM results WHERE job_id = :j"), {"j": JOBS[0].job_id}
            ).one()
            summary = conn.execute(
                text(f"SELECT count(*) FROM result_summaries WHERE job_id = :j AND {column}"), {"j": JOBS[0].job_id}
            ).scalar()
        return bool(flag), extra if isinstance(extra, dict) else json.loads(extra), summary  # SQLite's boolean is 1

    flag, extra, summaries = row("disturbed")
    assert flag is True and summaries > 0 and extra["busy"]["contended"] is True and "contention" not in extra
    db.downgrade(url, "0011")
    flag, extra, old_summaries = row("throttled")
    assert flag is True and old_summaries == summaries
    assert "busy" not in extra and extra["contention"] == busy.extra["busy"]
    db.upgrade(url)
    assert row("disturbed") == (True, busy.extra, summaries)
    with db.session_scope(url) as s:
        stored = result_store.load_stored(s, SWEEP_ID)[0].result
    assert stored.contended is True and stored.disturbed is True and stored.throttled is None
