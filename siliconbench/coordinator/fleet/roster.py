"""The fleet at fleet size: a summary by SKU and state, and one page of hosts, for `siliconbench workers` and the
Fleet page.

Reading every host in full (its models' manifests, its job tallies) on every render costs the coordinator in
proportion to the fleet (benchmarks/fleet_scale.py). Here the summary reads a few light columns of every host, and
only the page shown is read in full (sweeps.host_views over its names).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from siliconbench.contract.errors import UserError

from siliconbench.coordinator.fleet.peers import sku_of
from siliconbench.coordinator.fleet.placement import HostView
from siliconbench.coordinator.fleet.sweeps import host_views, is_online
from siliconbench.storage.tables import Host, utcnow

STATES = ("online", "busy", "offline")  # busy: online with a job running
PER_PAGE = 50


@dataclass
class Roster:
    """What a fleet's owner looks at first: how many hosts of each SKU are in each state, then one page of them."""

    counts: dict[str, Counter] = field(default_factory=dict)  # sku -> Counter(state -> hosts)
    total: int = 0  # hosts matching the filter
    page: int = 1
    pages: int = 1
    hosts: list[HostView] = field(default_factory=list)  # this page's hosts, read in full
    skus: dict[str, str] = field(default_factory=dict)  # this page's host name -> its SKU

    def state_totals(self) -> Counter:
        out: Counter = Counter()
        for c in self.counts.values():
            out.update(c)
        return out


def state_of(online: bool, current_job_id: str | None) -> str:
    return "offline" if not online else "busy" if current_job_id else "online"


def roster(
    session: Session,
    *,
    state: str | None = None,
    sku: str | None = None,
    page: int = 1,
    per_page: int = PER_PAGE,
) -> Roster:
    """The summary of every host, and page ``page`` (from 1) of the hosts in ``state`` / of ``sku``, by name."""
    if state is not None and state not in STATES:
        raise UserError("state", f"{state!r} is not a state; one of {', '.join(STATES)}.")
    if page < 1 or per_page < 1:
        raise UserError("page" if page < 1 else "per_page", "must be 1 or more.")
    now = utcnow()
    light = session.execute(
        select(Host.name, Host.chip, Host.memory_bytes, Host.os, Host.info, Host.online, Host.last_heartbeat,
               Host.current_job_id).order_by(Host.name)
    ).all()  # fmt: skip
    out = Roster()
    matching: list[tuple[str, str]] = []
    for name, chip, memory, os_, info, online, beat, job in light:
        host_sku = sku_of({"chip": chip, "memory_bytes": memory, "os": os_, "info": info})
        host_state = state_of(is_online(online, beat, now), job)
        out.counts.setdefault(host_sku, Counter())[host_state] += 1
        if (state is None or host_state == state) and (sku is None or host_sku == sku):
            matching.append((name, host_sku))
    if sku is not None and sku not in out.counts:
        raise UserError("sku", f"no host of SKU {sku!r}; the fleet's: {', '.join(sorted(out.counts)) or 'none'}.")
    out.total = len(matching)
    out.pages = max(1, -(-out.total // per_page))
    out.page = min(page, out.pages)
    shown = matching[(out.page - 1) * per_page : out.page * per_page]
    out.skus = dict(shown)
    out.hosts = host_views(session, names=[n for n, _ in shown]) if shown else []
    return out
