"""The worker's row in the hosts table: registered at start, heartbeats while alive, offline at a clean stop."""

from __future__ import annotations

import logging
import random
import threading
from pathlib import Path

from sqlalchemy import insert, update

from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.queues import HEARTBEAT_S, capability_queue, host_queue
from siliconbench.contract.settings import env_setting

from siliconbench.storage.database import session_scope
from siliconbench.storage.hot_path import HEARTBEAT
from siliconbench.storage.outages import DATABASE_DOWN
from siliconbench.storage.roles import check_worker_name
from siliconbench.storage.tables import Host, utcnow
from siliconbench.worker.engines import installed_engines
from siliconbench.worker.envs.venvs import available
from siliconbench.worker.platform.host_facts import host_facts
from siliconbench.worker.runtime import outages

log = logging.getLogger(__name__)


def capabilities(models_dir: Path) -> tuple[dict[str, str], dict[str, dict]]:
    """Engines installed here (name -> version) and models present (name -> manifest with digests)."""
    catalog = ModelCatalog(models_dir)
    engines = installed_engines()
    # A Mac may offer only some of its engines (SILICONBENCH_WORKER_ENGINES=mlx, set by --engines).
    offered = env_setting("worker_engines")
    if offered:
        engines = {e: v for e, v in engines.items() if e in offered.split(",")}
    # Engine environments (siliconbench env add): advertised as "mlx": "0.32.2, 0.31.3" for placement.

    engines = {e: ", ".join(dict.fromkeys([v, *available(e)])) for e, v in engines.items()}
    return engines, {n: m.model_dump(mode="json") for n, m in catalog.models.items()}


def queues_for(name: str, engines: dict, models: dict) -> list[str]:
    return [host_queue(name)] + [capability_queue(e, m) for e in engines for m in models]


def register(database_url: str, name: str, models_dir: Path) -> list[str]:
    """Upsert this worker's host row and return the queues it must consume."""
    engines, models = capabilities(models_dir)
    facts = host_facts()
    row = dict(
        hostname=facts["hostname"],
        chip=facts["chip"],
        memory_bytes=facts["memory_bytes"],
        os=facts["os_version"],
        info=facts,
        engines=[{"name": e, "version": v} for e, v in engines.items()],
        models=list(models.values()),
        online=True,
        last_heartbeat=utcnow(),
        current_job_id=None,
    )
    with session_scope(database_url) as s:
        warning = check_worker_name(s, name)  # a worker login may register only the host bound to it
        if s.execute(update(Host).where(Host.name == name).values(**row)).rowcount == 0:
            s.execute(insert(Host).values(name=name, **row))
    if warning:
        log.warning(warning)
    return queues_for(name, engines, models)


def advertise_models(database_url: str, name: str, models_dir: Path) -> None:
    """Refresh this host's models (after a fetch), so placement and the Fleet page see them at once."""
    _engines, models = capabilities(models_dir)
    with session_scope(database_url) as s:
        s.execute(update(Host).where(Host.name == name).values(models=list(models.values())))


def set_activity(database_url: str, name: str, activity: dict | None) -> None:
    with session_scope(database_url) as s:
        s.execute(update(Host).where(Host.name == name).values(activity=activity))


def mark_offline(database_url: str, name: str) -> None:
    with session_scope(database_url) as s:
        s.execute(update(Host).where(Host.name == name).values(online=False, current_job_id=None))


class Heartbeat(threading.Thread):
    """Every HEARTBEAT_S: last_heartbeat = now, the current job, and flush results spooled while the
    database was away."""

    def __init__(self, database_url: str, name: str, spool=None, interval_s: float = HEARTBEAT_S, ctx=None):
        super().__init__(daemon=True, name="siliconbench-heartbeat")
        self.url, self.name, self.spool, self.interval_s, self.ctx = database_url, name, spool, interval_s, ctx
        self.stopped = threading.Event()

    def beat(self) -> None:
        current = self.ctx.current_job if self.ctx else None
        held = getattr(self.ctx, "held", None)
        if held is not None and held.usable():  # the worker's one connection (storage.hot_path)
            held.heartbeat(self.name, current)
        else:
            with session_scope(self.url) as s:
                s.execute(HEARTBEAT, {"host": self.name, "now": utcnow(), "job": current})
        if self.spool is not None and self.spool.pending():
            self.spool.flush(self.url)

    def run(self) -> None:
        # The first beat at a random point of the interval: a fleet started together (a power cut's end, a
        # deploy) spreads its writes over the interval instead of sending them all in the same instant.
        wait = random.uniform(0, self.interval_s)
        while not self.stopped.wait(wait):
            wait = self.interval_s
            try:
                self.beat()
                outages.DATABASE.up()
            except DATABASE_DOWN as exc:  # it may be away for a while; keep beating (one line each way), as the
                # lease keeper and the claims do
                outages.DATABASE.down(exc)
            except Exception as exc:
                log.warning("heartbeat failed: %s", exc)
