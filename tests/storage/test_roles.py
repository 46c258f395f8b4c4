"""Least privilege in PostgreSQL (migration 0006): a worker login does a worker's job and nothing more.

Real PostgreSQL with the real migrations; logins made by `siliconbench db worker-role` (the real CLI) or
siliconbench.storage.roles; every refusal is the server's own (permission denied, or a row-level security violation).
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from sqlalchemy import func, select, update

from siliconbench.contract.errors import UserError

from harness.fleet import ROOT
from harness.pgbouncer import PgBouncer
from siliconbench.storage import database as db, jobstate, result_store, roles, sweep_store
from siliconbench.storage.hot_path import HeldConnection
from siliconbench.storage.tables import Host, Job, Result, SampleRow
from siliconbench.worker.runtime.registration import register
from tests.conftest import new_pg_database
from tests.storage.records import JOBS, SPEC, SWEEP_ID, make_result


@pytest.fixture
def url():
    with new_pg_database("sb_roles", migrated=True) as u:
        with db.session_scope(u) as s:
            sweep_store.create_sweep(s, SWEEP_ID, SPEC, JOBS)
            s.execute(update(Job).where(Job.id == JOBS[3].job_id).values(target_host="mini-2"))
        yield u


def _login(url: str, host: str) -> str:
    return roles.create_login(url, "worker", roles.login_for(host), host=host).rendered()


def _raw(url: str) -> psycopg.Connection:
    u = db.normalize_url(url)
    return psycopg.connect(
        host=u.host, port=u.port or 5432, user=u.username, password=u.password, dbname=u.database, autocommit=True
    )


def test_a_worker_login_registers_claims_and_records_its_own_work(url, models_dir):
    mini1 = _login(url, "mini-1")
    assert register(mini1, "mini-1", models_dir)  # its queues
    job = JOBS[0]
    with db.session_scope(mini1) as s:
        assert jobstate.claim(s, job.job_id, worker="mini-1", host="mini-1").job is not None
        assert jobstate.renew(s, job.job_id, worker="mini-1")
    with db.session_scope(mini1) as s:
        assert result_store.save_result(s, job, make_result(job), host="mini-1", worker="mini-1")
    with db.session_scope(mini1) as s:  # a redelivered result is still a no-op, not an error
        assert not result_store.save_result(s, job, make_result(job), host="mini-1", worker="mini-1")
    with db.session_scope(url) as s:
        assert s.get(Job, job.job_id).status == "ok"
        assert s.scalar(select(func.count()).select_from(SampleRow).where(SampleRow.job_id == job.job_id)) > 0
        assert s.get(Host, "mini-1").online


def test_a_worker_login_cannot_drop_alter_delete_or_act_as_another_host(url, models_dir):
    mini1, mini2 = _login(url, "mini-1"), _login(url, "mini-2")
    register(mini2, "mini-2", models_dir)
    held = JOBS[1]
    with db.session_scope(mini2) as s:  # mini-2 holds a job and finished another
        assert jobstate.claim(s, held.job_id, worker="mini-2", host="mini-2").job is not None
        assert jobstate.claim(s, JOBS[2].job_id, worker="mini-2", host="mini-2").job is not None
    with db.session_scope(mini2) as s:
        result_store.save_result(s, JOBS[2], make_result(JOBS[2]), host="mini-2", worker="mini-2")

    with _raw(mini1) as c:
        for statement in (
            "DROP TABLE results",
            "ALTER TABLE jobs ADD COLUMN x int",
            "CREATE TABLE t (x int)",
            "TRUNCATE samples",
            "DELETE FROM results",
            "DELETE FROM samples",
            "DELETE FROM jobs",
            "UPDATE results SET status = 'failed'",
            "UPDATE jobs SET spec = '{}'",
            "UPDATE jobs SET target_host = 'mini-1'",
            "DELETE FROM hosts",
            "DROP ROLE sbw_mini_2",
            "INSERT INTO worker_logins (login, host) VALUES ('sbw_mini_1', 'mini-2')",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute(statement)
        # Rows of another host are out of reach: not visible to UPDATE, refused to INSERT.
        assert c.execute("UPDATE hosts SET chip = 'x' WHERE name = 'mini-2'").rowcount == 0
        assert c.execute("UPDATE jobs SET status = 'queued' WHERE id = %s", [held.job_id]).rowcount == 0
        assert c.execute("UPDATE jobs SET worker = 'mini-1' WHERE id = %s", [JOBS[3].job_id]).rowcount == 0  # pinned
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            c.execute("INSERT INTO hosts (name, online) VALUES ('mini-3', true)")
    with db.session_scope(mini1) as s:  # nor can it claim what another holds, or write a result for it
        assert jobstate.claim(s, held.job_id, worker="mini-1", host="mini-1").job is None
        assert jobstate.claim(s, JOBS[3].job_id, worker="mini-1", host="mini-1").job is None
    with pytest.raises(Exception) as err, db.session_scope(mini1) as s:
        result_store.save_result(s, held, make_result(held), host="mini-1", worker="mini-1")
    assert roles.refused_by_rules(err.value)
    with pytest.raises(UserError, match="may act only as host 'mini-1'") as named:
        register(mini1, "mini-2", models_dir)
    assert named.value.field == "--name"

    with db.session_scope(url) as s:  # everything of mini-2 is as it left it
        assert s.get(Job, held.job_id).worker == "mini-2" and s.get(Result, held.job_id) is None
        assert s.get(Result, JOBS[2].job_id).status == "ok"
        assert s.get(Host, "mini-2").chip != "x"


def test_db_worker_role_prints_a_url_that_works_and_a_coordinator_login_has_no_ddl(url):
    env = {**os.environ, "SILICONBENCH_DATABASE_URL": url}
    out = subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", "db", "worker-role", "mini-9", "--address", "127.0.0.1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    given = out.split("--database '")[1].split("'")[0]
    assert "sbw_mini_9:" in given and "--name mini-9" in out
    with db.session_scope(given) as s:
        who = roles.identity(s)
    assert (who.login, who.worker_role, who.host) == ("sbw_mini_9", True, "mini-9")

    keyed = subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", "db", "worker-role", "mini-9", "--password-env", "PW"],
        cwd=ROOT,
        env={**env, "PW": "s3cret-from-env"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "sbw_mini_9:***@" in keyed.stdout and "s3cret-from-env" not in keyed.stdout  # its owner has it already
    with _raw(given.replace(given.split(":")[2].split("@")[0], "s3cret-from-env")) as c:  # re-keyed, same login
        assert c.execute("SELECT current_user").fetchone()[0] == "sbw_mini_9"

    bad = subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", "db", "worker-role", "mini-9", "--login", "Bad-Name"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--login" in bad.stderr

    out = subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", "db", "coordinator-role", "dash"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with _raw(out.strip().splitlines()[-1]) as c:
        assert c.execute("SELECT count(*) FROM jobs").fetchone()[0] == len(JOBS)  # sees every row
        assert c.execute("DELETE FROM results").rowcount == 0  # may prune results
        for statement in ("DROP TABLE results", "ALTER TABLE jobs ADD COLUMN x int", "CREATE TABLE t (x int)"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute(statement)


def test_a_coordinator_login_stores_a_sweep(url):
    """Row-level security applies to the coordinator's login, and PostgreSQL refuses COPY FROM there: its
    sweeps' jobs go by INSERT (the owner's still go by COPY), the same rows either way."""
    coord = roles.create_login(url, "coordinator", "sbc_submit").rendered()
    with db.session_scope(coord) as s:
        assert sweep_store._row_security_on_jobs(s)
        sweep_store.create_sweep(
            s,
            "by-coordinator",
            SPEC,
            [j.model_copy(update={"sweep_id": "by-coordinator", "job_id": j.job_id + "-c"}) for j in JOBS],
        )
    with db.session_scope(url) as s:
        assert not sweep_store._row_security_on_jobs(s)
        mine = s.scalars(select(Job).where(Job.sweep_id == "by-coordinator").order_by(Job.idx)).all()
        theirs = s.scalars(select(Job).where(Job.sweep_id == SWEEP_ID).order_by(Job.idx)).all()
    assert [(j.idx, j.model, j.status, j.spec["model"]) for j in mine] == [
        (j.idx, j.model, j.status, j.spec["model"]) for j in theirs
    ] and len(mine) == len(JOBS)


def test_one_login_made_from_several_places_at_once_ends_with_one_of_them(url):
    """Roles are the server's, not one database's: two `fleet add-worker`s for one host, or two databases of one
    server, make or re-key the same login at once and collide in the server's catalog. Every call succeeds and
    one login is left, bound to its host, a member of the worker role."""
    login = roles.login_for(f"race-{os.getpid()}")
    try:
        with ThreadPoolExecutor(4) as pool:
            made = list(pool.map(lambda _: roles.create_login(url, "worker", login, host="mini-1"), range(16)))
        assert {m.login for m in made} == {login}
        with _raw(url) as c:
            assert c.execute("SELECT host FROM worker_logins WHERE login = %s", (login,)).fetchall() == [("mini-1",)]
            assert c.execute("SELECT pg_has_role(%s, %s, 'member')", (login, roles.WORKER_ROLE)).fetchone() == (True,)
    finally:
        with _raw(url) as c:
            c.execute(f'DROP ROLE IF EXISTS "{login}"')


def test_the_pooled_login_works_through_pgbouncer_as_the_host_its_connection_names(url, models_dir, tmp_path):
    """Migration 0017: one login for a fleet behind PgBouncer (transaction pooling), made by `db pooled-worker-role`.
    Through the pooler each worker acts as the host its application_name names, on the worker role's grants; with
    no name it writes nothing; it still drops, alters and deletes nothing."""
    out = subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", "db", "pooled-worker-role", "--password-env", "PW"],
        cwd=ROOT, env={**os.environ, "SILICONBENCH_DATABASE_URL": url, "PW": "pooled-pw"}, capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    assert "SILICONBENCH_DATABASE_POOLED=1" in out.stdout and f"{roles.POOLED_LOGIN}:***@" in out.stdout
    bouncer = PgBouncer([roles.POOLED_LOGIN]).start()
    try:
        pooled = bouncer.url(db.normalize_url(url).database, user=roles.POOLED_LOGIN)
        mini1, mini2 = db.as_application(pooled, "mini-1"), db.as_application(pooled, "mini-2")
        os.environ["SILICONBENCH_DATABASE_POOLED"] = "1"  # this process's engines: no prepared statements
        try:
            register(mini1, "mini-1", models_dir)
            register(mini2, "mini-2", models_dir)
            with pytest.raises(UserError, match="application_name") as named:
                register(mini1, "mini-2", models_dir)  # the login acts only as the host its connection names
            assert named.value.field == "--database"
            for _ in range(6):  # past psycopg's prepare threshold (5): a prepared statement would fail here
                with db.session_scope(mini1) as s:
                    s.execute(update(Host).where(Host.name == "mini-1").values(online=True))
            # the worker's one held connection (heartbeats, claims, renewals, results), unprepared through the pooler
            held1, held2 = HeldConnection(mini1), HeldConnection(mini2)
            for _ in range(6):
                held1.heartbeat("mini-1", None)
            assert held1.claim(JOBS[1].job_id, worker="mini-1", host="mini-1").job is not None
            assert held1.renew(JOBS[1].job_id, worker="mini-1") and not held2.renew(JOBS[1].job_id, worker="mini-2")
            assert held1.save_result(JOBS[1], make_result(JOBS[1]), host="mini-1", worker="mini-1", durable=True)
            held1.close()
            held2.close()
            job = JOBS[0]
            with db.session_scope(mini1) as s:
                assert jobstate.claim(s, job.job_id, worker="mini-1", host="mini-1").job is not None
            with db.session_scope(mini2) as s:  # mini-2, on the same login, cannot take or write mini-1's job
                assert jobstate.claim(s, job.job_id, worker="mini-2", host="mini-2").job is None
            with pytest.raises(Exception) as err, db.session_scope(mini2) as s:
                result_store.save_result(s, job, make_result(job), host="mini-2", worker="mini-2")
            assert roles.refused_by_rules(err.value)
            with db.session_scope(mini1) as s:
                assert result_store.save_result(s, job, make_result(job), host="mini-1", worker="mini-1")
        finally:
            del os.environ["SILICONBENCH_DATABASE_POOLED"]
            db.dispose()
        u = db.normalize_url(pooled)
        with psycopg.connect(host=u.host, port=u.port, user=u.username, dbname=u.database, autocommit=True) as c:
            for statement in ("DELETE FROM results", "DROP TABLE results", "UPDATE results SET status = 'failed'"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    c.execute(statement)
    finally:
        bouncer.stop()
    # Connected directly with no name, it is no host. (Through PgBouncer a connection that sends no application_name
    # keeps the one its server connection last carried: the pooled login names its host itself either way.)
    direct = db.normalize_url(url)
    with psycopg.connect(host=direct.host, port=direct.port, user=roles.POOLED_LOGIN, dbname=direct.database,
                         autocommit=True) as c:  # fmt: skip
        assert c.execute("UPDATE hosts SET chip = 'x'").rowcount == 0
    with db.session_scope(url) as s:
        assert s.get(Job, JOBS[0].job_id).worker == "mini-1" and s.get(Result, JOBS[0].job_id).status == "ok"
        assert s.get(Job, JOBS[1].job_id).status == "ok" and s.get(Host, "mini-1").last_heartbeat is not None
        assert {h.name for h in s.scalars(select(Host))} == {"mini-1", "mini-2"}
