"""Models the coordinator knows by itself (the fleet_models table): put idempotently by name, listed, removed.

A manifest stored here is the one ``models add`` wrote on the operator's machine; every form in it has a fetchable
origin (checked before it is stored, coordinator side), so a worker that lacks it fetches it before its first job.
"""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from siliconbench.storage.tables import FleetModel, utcnow


def put_model(session: Session, manifest: dict, published_by: str | None) -> bool:
    """Store (or replace) a model's manifest under its name; True when it was new."""
    row = session.get(FleetModel, manifest["name"])
    if row is None:
        session.add(FleetModel(name=manifest["name"], manifest=manifest, published_by=published_by))
        return True
    row.manifest, row.published_by, row.published_at = manifest, published_by, utcnow()
    return False


def list_models(session: Session) -> list[dict]:
    """Every published manifest, by name."""
    return [r.manifest for r in session.scalars(select(FleetModel).order_by(FleetModel.name))]


def remove_model(session: Session, name: str) -> bool:
    return session.execute(delete(FleetModel).where(FleetModel.name == name)).rowcount > 0
