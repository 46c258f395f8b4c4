"""Each target host's engine environment for a campaign's candidate: the worker's report, the coordinator's read.

A worker writes only its own host's row (migration 0008's row-level rules), so the report is one upsert of
that row, made under the worker's own login; the coordinator reads every host's row of a campaign before
it enqueues the suite. Below both sides: neither imports the other to exchange this.
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from .tables import utcnow
from .watch_tables import CAMPAIGN_HOST_STATUSES, CampaignHost

COLUMNS = ("host", "status", "env_name", "packages", "error", "reported_at", "request")


def report_env(
    session: Session,
    campaign_id: int,
    host: str,
    *,
    status: str,
    env_name: str | None = None,
    packages: dict[str, str] | None = None,
    error: str | None = None,
    request: str | None = None,
) -> None:
    """Record ``host``'s environment for the campaign: pending (installing), ready (its name and package
    versions) or failed (why), with what it was asked to make (``request``: a build's ref, echoed). Every field is
    set each time, so a later report replaces an earlier one."""
    if status not in CAMPAIGN_HOST_STATUSES:
        raise ValueError(f"status {status!r} is not one of {', '.join(CAMPAIGN_HOST_STATUSES)}")
    values = dict(
        status=status,
        env_name=env_name,
        packages=dict(packages or {}),
        error=error,
        reported_at=utcnow(),
        request=request,
    )
    table = CampaignHost.__table__
    make = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}.get(session.get_bind().dialect.name)
    if make is None:  # another dialect: update, else insert (a racing second insert fails loudly)
        hit = session.execute(
            update(table).where(table.c.campaign_id == campaign_id, table.c.host == host).values(**values)
        ).rowcount
        if not hit:
            session.execute(table.insert().values(campaign_id=campaign_id, host=host, **values))
        return
    # One statement: a redelivered task's report and the coordinator's pending row meet without a race.
    # Under the worker's login PostgreSQL checks both the INSERT and the UPDATE rule (host = its own).
    stmt = make(table).values(campaign_id=campaign_id, host=host, **values)
    session.execute(stmt.on_conflict_do_update(index_elements=["campaign_id", "host"], set_=values))


def env_reports(session: Session, campaign_id: int) -> dict[str, dict]:
    """host -> its row as a dict (host, status, env_name, packages, error, reported_at), for one campaign."""
    rows = session.scalars(
        select(CampaignHost).where(CampaignHost.campaign_id == campaign_id).order_by(CampaignHost.host)
    )
    return {r.host: {c: getattr(r, c) for c in COLUMNS} for r in rows}
