"""Sweeps and their jobs: created (COPY on PostgreSQL), owned, marked running, listed and counted. Plain
functions on the caller's Session (its transaction)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import timedelta

from sqlalchemy import func, insert, or_, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.spec import SweepSpec

from siliconbench.storage import user_files
from siliconbench.storage.tables import JOB_STATUSES, Job, Result, Sweep, utcnow


def _job_row(j: JobSpec) -> dict:
    return dict(
        id=j.job_id,
        sweep_id=j.sweep_id,
        idx=j.index,
        spec=j.model_dump(mode="json"),
        model=j.model,
        engine=j.engine,
        quant=j.quant,
        quant_level=j.quant_level,
        workload=j.workload,
        n_prompt=j.n_prompt,
        n_gen=j.n_gen,
        n_depth=j.n_depth,
        repetitions=j.repetitions,
        model_sha256=j.model_sha256,
        status="queued",
        attempts=0,
        target_host=j.host,
    )


def create_sweep(session: Session, sweep_id: str, spec: SweepSpec, jobs: list[JobSpec]) -> None:
    """Store a sweep and its jobs (queued); UserError("sweep") if the id exists already."""
    repeated = [i for i, n in Counter(j.job_id for j in jobs).items() if n > 1]
    if repeated:
        raise UserError(
            "sweep",
            f"the matrix lists one configuration more than once (job {repeated[0]}); "
            "remove the repeated workload or value.",
        )
    strangers = sorted({j.sweep_id for j in jobs} - {sweep_id})
    if strangers:
        raise ValueError(f"jobs of sweep {strangers[0]!r} handed to create_sweep({sweep_id!r})")
    try:
        with session.begin_nested():  # a savepoint: a duplicate leaves the caller's transaction usable
            session.execute(
                insert(Sweep.__table__).values(
                    id=sweep_id,
                    name=spec.name,
                    spec=spec.model_dump(mode="json", by_alias=True),
                    status="queued",
                    n_jobs=len(jobs),
                )
            )
    except IntegrityError:
        raise UserError(
            "sweep",
            f"sweep {sweep_id!r} exists already (the same spec was submitted before); "
            "resume it, or rename the sweep to measure again.",
        ) from None
    if not jobs:
        return
    user_files.put_job_files(session, jobs)  # a dataset the jobs name by digest, stored once, before any job is
    if session.get_bind().dialect.name == "postgresql" and not _row_security_on_jobs(session):
        _copy_jobs(session, jobs)
    else:
        session.execute(insert(Job.__table__), [_job_row(j) for j in jobs])


_COPY_COLUMNS = (
    "id",
    "sweep_id",
    "idx",
    "spec",
    "model",
    "engine",
    "quant",
    "quant_level",
    "workload",
    "n_prompt",
    "n_gen",
    "n_depth",
    "repetitions",
    "model_sha256",
    "status",
    "attempts",
    "target_host",
    "created_at",
)


def _row_security_on_jobs(session: Session) -> bool:
    """Whether row-level security applies to this login on jobs (the coordinator's least-privilege login):
    PostgreSQL refuses COPY FROM there ("not supported with row-level security"), so its rows go by INSERT."""
    return bool(session.execute(text("SELECT row_security_active('jobs')")).scalar())


def _copy_jobs(session: Session, jobs: list[JobSpec]) -> None:
    """The jobs' rows through COPY, in the session's transaction: ~4x executemany (measured on the project's VM).

    Same rows as the executemany path (_job_row): the spec as SQLAlchemy's JSON type writes it (json.dumps),
    created_at set here like the model's Python-side default.
    """
    dbapi = session.connection().connection.dbapi_connection  # the psycopg connection of this transaction
    now = utcnow()
    with dbapi.cursor() as cur, cur.copy(f"COPY jobs ({', '.join(_COPY_COLUMNS)}) FROM STDIN") as copy:
        for j in jobs:
            copy.write_row(
                (
                    j.job_id,
                    j.sweep_id,
                    j.index,
                    json.dumps(j.model_dump(mode="json")),
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
                    "queued",
                    0,
                    j.host,
                    now,
                )
            )


def set_owner(session: Session, sweep_id: str, owner: str | None) -> None:
    """Record the process that runs an embedded sweep (None: the fleet's workers do)."""
    session.execute(update(Sweep).where(Sweep.id == sweep_id).values(owner=owner))


def mark_running(
    session: Session, job_id: str, host: str | None, worker: str | None, lease_s: float | None = None
) -> bool:
    """Record that ``worker`` on ``host`` started the job; False if the job has a final status already."""
    now = utcnow()
    res = session.execute(
        update(Job.__table__)
        .where(Job.id == job_id, Job.status.in_(("queued", "running")))
        .values(
            status="running",
            host=host,
            worker=worker,
            started_at=now,
            attempts=Job.attempts + 1,
            lease_expires_at=now + timedelta(seconds=lease_s) if lease_s else None,
        )
    )
    if res.rowcount != 1:
        return False
    sweep_of_job = select(Job.sweep_id).where(Job.id == job_id).scalar_subquery()
    session.execute(
        update(Sweep.__table__).where(Sweep.id == sweep_of_job, Sweep.status == "queued").values(status="running")
    )
    return True


def pending_jobs(session: Session, sweep_id: str) -> list[JobSpec]:
    """The sweep's jobs that have no result yet, in run order (what a resumed sweep still has to run)."""
    q = (
        select(Job.spec)
        .outerjoin(Result, Result.job_id == Job.id)
        .where(Job.sweep_id == sweep_id, Result.job_id.is_(None))
        .order_by(Job.idx)
    )
    return [JobSpec.model_validate(spec) for spec in session.scalars(q)]


def latest_sweep_id(session: Session) -> str | None:
    return session.scalar(select(Sweep.id).order_by(Sweep.created_at.desc(), Sweep.id.desc()).limit(1))


def _counts(session: Session, sweep_id: str | None = None, sweep_ids=None) -> dict[str, dict[str, int]]:
    q = select(Job.sweep_id, Job.status, func.count()).group_by(Job.sweep_id, Job.status)
    if sweep_id is not None:
        q = q.where(Job.sweep_id == sweep_id)
    if sweep_ids is not None:
        q = q.where(Job.sweep_id.in_(sweep_ids))
    out: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(JOB_STATUSES, 0))
    for sid, status, n in session.execute(q):
        out[sid][status] = n
    return out


def list_sweeps(session: Session, limit: int | None = None) -> list[dict]:
    """Sweeps newest first: id, name, status, n_jobs, created_at, and job counts by status.

    With ``limit``: the newest ``limit`` sweeps and every queued or running one, counting only their jobs
    (a page's list costs the same after a year of history).
    """
    q = select(Sweep.id, Sweep.name, Sweep.status, Sweep.n_jobs, Sweep.created_at).order_by(
        Sweep.created_at.desc(), Sweep.id.desc()
    )
    if limit is None:
        rows, counts = session.execute(q).mappings().all(), _counts(session)
    else:
        newest = select(Sweep.id).order_by(Sweep.created_at.desc(), Sweep.id.desc()).limit(limit)
        rows = (
            session.execute(
                q.where(or_(Sweep.id.in_(newest.scalar_subquery()), Sweep.status.in_(("queued", "running"))))
            )
            .mappings()
            .all()
        )
        counts = _counts(session, sweep_ids=[r["id"] for r in rows])
    return [dict(r, jobs=counts[r["id"]]) for r in rows]


def sweep_progress(session: Session, sweep_id: str) -> dict[str, int]:
    """Job counts by status (every status present, zeros included); UserError for an unknown sweep."""
    if session.get(Sweep, sweep_id) is None:
        recent = list(session.scalars(select(Sweep.id).order_by(Sweep.created_at.desc()).limit(10)))
        raise UserError("sweep", f"no sweep {sweep_id!r} in the database.", recent)
    return _counts(session, sweep_id)[sweep_id]


def refresh_sweep_status(session: Session, sweep_id: str) -> str:
    """Set the sweep's status from its jobs' (done once none is queued or running); returns it.

    Call it after the last job, not per result: concurrent writers cannot see each other's last job.
    """
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        raise UserError("sweep", f"no sweep {sweep_id!r} in the database.")
    if sweep.status != "cancelled":
        c = sweep_progress(session, sweep_id)
        if not c["queued"] and not c["running"]:
            sweep.status = "done"
        elif c["queued"] < sum(c.values()):  # something started or finished
            sweep.status = "running"
        session.flush()
    return sweep.status
