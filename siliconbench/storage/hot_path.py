"""The worker's hot path to PostgreSQL: the two writes of every job (claim, result), its heartbeats and lease renewals,
on one held connection: a worker holds one PostgreSQL connection, idle or busy (benchmarks/fleet_scale.py).

The one place outside SQLAlchemy's Session where the project talks to PostgreSQL's driver directly: the
statements are the ones the Session paths run (``jobstate.CLAIM_ASYNC_SQL``, ``result_store.SAVE_SQL``), prepared on
the server, and psycopg's errors are translated here into SQLAlchemy's, so callers handle one family of
errors whichever path ran. The worker uses it through ``HeldConnection.claim``, ``.save_result``, ``.heartbeat``
and ``.renew``.
"""

from __future__ import annotations

import threading

from sqlalchemy import bindparam, func, update
from sqlalchemy.exc import DBAPIError, OperationalError

from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.results import JobResult
from siliconbench.contract.settings import env_setting

from siliconbench.storage.database import engine_for
from siliconbench.storage.jobstate import Claim, postgres_text, renew_with, try_claim_async_with
from siliconbench.storage.result_store import save_result_with
from siliconbench.storage.tables import Host, utcnow

_HOSTS = Host.__table__
# The host's heartbeat, one definition for the held connection (below) and a Session (the worker's fallback,
# siliconbench.worker.runtime.registration.Heartbeat), as the claim's is (jobstate._claim_statement).
HEARTBEAT = (
    update(_HOSTS)
    .where(_HOSTS.c.name == bindparam("host"))  # not "name": see jobstate._renew_statement
    .values(last_heartbeat=bindparam("now", type_=_HOSTS.c.last_heartbeat.type), online=True,
            current_job_id=bindparam("job", type_=_HOSTS.c.current_job_id.type))
)  # fmt: skip
HEARTBEAT_SQL, _HEARTBEAT_LITERALS = postgres_text(
    HEARTBEAT.returning(_HOSTS.c.name, func.set_config("synchronous_commit", "off", True)), ("host", "now", "job")
)


class HeldConnection:
    """The worker's own PostgreSQL connection for the two writes of every job (claim, result), and for the heartbeat
    and lease threads' one statement each (a lock keeps them apart).

    Held between jobs, so a job costs no pool checkout and no pre-ping (``SELECT 1``) per transaction,
    and in autocommit: the claim and the result are one statement each (jobstate.CLAIM_ASYNC_SQL,
    result_store.SAVE_SQL), atomic and committed when they return, without a BEGIN and a COMMIT round trip
    around them. Both run on the bare psycopg connection (``execute``), prepared on the server at their
    first use: a job then costs their Bind/Execute and no parsing or planning, nor SQLAlchemy's statement
    machinery on the client (the texts are the ones the Session paths run, so they cannot drift apart).
    The claim does not wait for its fsync, nor does the result of a job shorter than durable_after_s (why no
    result is lost or doubled: jobstate.try_claim); a longer job's result commits synchronously, before the
    ack. Anything that needs more than one statement (a refused claim, a requeue) still runs in a
    session_scope transaction.

    A connection that fails is dropped; if it had been idle in our hands (the server restarted, the
    network blipped), the call is tried once more on a fresh, pre-pinged one from the pool before the
    error goes to the caller (which retries the claim, or spools the result, as before). psycopg's errors
    reach the caller as SQLAlchemy's (OperationalError, ProgrammingError ...), as from a Session.
    """

    def __init__(self, url: str):
        self.url = url
        self.conn = None
        self.cursor = None  # the psycopg cursor of ``execute``, on ``conn``
        self.supported: bool | None = None  # PostgreSQL only (save_result is one statement there)
        # Server-side prepared statements do not survive a transaction pooler (PgBouncer before 1.21 hands each
        # statement to any server connection): SILICONBENCH_DATABASE_POOLED turns them off.
        self.prepare = not env_setting("database_pooled")
        self.lock = threading.Lock()  # the heartbeat and lease threads use it too, one statement at a time

    def usable(self) -> bool:
        if self.supported is None:
            try:
                self.supported = engine_for(self.url).dialect.name == "postgresql"
            except Exception:  # e.g. no driver: the session_scope path reports it as before
                return False
        return self.supported

    def execute(self, sql: str, params: dict):
        """One autocommitted statement, prepared; its first returned row (None if none)."""
        with self.lock:
            return self._execute(sql, params)

    def _execute(self, sql: str, params: dict):
        import psycopg  # PostgreSQL only (usable()): its driver is there

        for retry in (True, False):
            reused = self.conn is not None
            if self.conn is None:
                self.conn = engine_for(self.url).connect().execution_options(isolation_level="AUTOCOMMIT")
                self.cursor = self.conn.connection.dbapi_connection.cursor()  # one for the connection's life
            dbapi = self.conn.connection.dbapi_connection
            try:
                return self.cursor.execute(sql, params, prepare=self.prepare).fetchone()
            except psycopg.Error as orig:
                dialect = self.conn.dialect
                lost = dialect.is_disconnect(orig, dbapi, None)
                exc = DBAPIError.instance(
                    sql, params, orig, psycopg.Error, connection_invalidated=lost, dialect=dialect
                )
                self.close(invalidate=lost or isinstance(exc, OperationalError))
                if not (retry and reused and (lost or isinstance(exc, OperationalError))):
                    raise exc from orig

    def claim(self, job_id: str, *, worker: str, host: str) -> Claim | None:
        """The one-statement claim (None: refused, and a session explains why)."""
        return try_claim_async_with(self.execute, job_id, worker=worker, host=host)

    def save_result(self, job: JobSpec, result: JobResult, *, host: str, worker: str, durable: bool) -> bool:
        """Result, samples and job status in one statement; False if the job is no longer this worker's."""
        return save_result_with(self.execute, job, result, host=host, worker=worker, durable=durable)

    def heartbeat(self, name: str, current_job: str | None) -> None:
        """The host's heartbeat: one statement, not waiting for its WAL flush (a beat lost in a crash is the next
        one's to write)."""
        self.execute(HEARTBEAT_SQL, dict(_HEARTBEAT_LITERALS, host=name, now=utcnow(), job=current_job))

    def renew(self, job_id: str, *, worker: str) -> bool:
        """Extend the lease of a job this worker runs; False if it is no longer ours."""
        return renew_with(self.execute, job_id, worker=worker)

    def close(self, invalidate: bool = False) -> None:
        conn, self.conn, self.cursor = self.conn, None, None
        if conn is None:
            return
        try:
            if invalidate:
                conn.invalidate()
            conn.close()
        except Exception:  # a dead connection may fail to close; it is forgotten either way
            pass
