"""Peers decide what is real: a campaign's fleet verdict per series, and hosts that disagree with their SKU peers.

An **SKU** (``sku_of``) is what makes two hosts the same machine for a benchmark: the chip's name, its CPU
cores (performance + efficiency on a Mac, physical elsewhere), its GPU cores (binned Apple chips of one name
differ in them), the memory rounded to GiB, and the OS with its major version ("macOS 15"). Minor OS updates,
hostnames and engines installed are not part of it.

**Fleet verdict** (``fleet_verdict``), per series and metric, from each host's baseline/candidate verdict
(a ``Comparison`` or a sequential ``Decision``; an undecided or *inconclusive* one is no evidence either way). Per
SKU, over the hosts with evidence (hosts listed in ``suspects`` are left out):

- one such host: a change is ``needs_confirmation`` (the campaign runs an interleaved rerun, a fleet
  ``confirm`` on that host, and passes it in ``confirmations``: ``confirmed_verdict`` then decides); an
  equivalence is ``equivalent``;
- two or more: ``regression`` when at least two hosts regress, none improves and the regressing hosts are
  a majority of them (likewise ``improvement``); any other change is ``inconsistent``; all equivalent is
  ``equivalent``; no host with evidence: ``inconclusive``.

Over SKUs the fleet verdict is the first that some SKU has, in the order regression, improvement,
needs_confirmation, inconsistent, inconclusive, equivalent (a regression replicated on one SKU is a regression
of the version even if another SKU improves; a release is called equivalent only where every SKU says so).

**Suspect hosts**: ``siliconbench.coordinator.fleet.suspects`` (re-exported here); stored by ``save_suspects``.
"""

from __future__ import annotations

import math
import re

from sqlalchemy import select
from sqlalchemy.orm import Session

from siliconbench.coordinator.fleet.suspects import SUSPECT_ALPHA, PeerTest, peer_tests, series_level, suspect_hosts
from siliconbench.coordinator.history.points import Point, to_point
from siliconbench.coordinator.stats.significance import Verdict
from siliconbench.storage.result_store import load_stored
from siliconbench.storage.tables import utcnow
from siliconbench.storage.watch_tables import SuspectHost

ORDER = ("regression", "improvement", "needs_confirmation", "inconsistent", "inconclusive", "equivalent")
NO_EVIDENCE = "inconclusive"


# ---------------------------------------------------------------------------------------------- SKU


def sku_of(host) -> str:
    """The SKU of a Host row, a HostView or a ``list_hosts`` dict, e.g. 'Apple M4 Pro · 14 CPU · 20 GPU ·
    64 GiB · macOS 15'."""
    get = host.get if isinstance(host, dict) else (lambda k, d=None: getattr(host, k, d))
    info = get("info") or {}
    d = get("details") or info.get("host_details") or {}
    cpu = (
        ((d.get("performance_cores") or 0) + (d.get("efficiency_cores") or 0))
        or d.get("physical_cores")
        or info.get("cores")
    )
    mem = get("memory_bytes")
    m = re.match(r"\s*(\D*?)\s*(\d+)", get("os") or "")
    os_major = f"{m.group(1)} {m.group(2)}".strip() if m else (get("os") or "unknown OS")
    parts = [
        get("chip") or "unknown chip",
        f"{cpu} CPU" if cpu else None,
        f"{d['gpu_cores']} GPU" if d.get("gpu_cores") else None,
        f"{round(mem / 2**30)} GiB" if mem else None,
        os_major,
    ]
    return " · ".join(p for p in parts if p)


# ------------------------------------------------------------------------------------ fleet verdict


def _verdict(x) -> str:
    """A Comparison's or Decision's verdict as this module's word; undecided or missing: inconclusive."""
    if x is None or getattr(x, "decided", True) is False:
        return NO_EVIDENCE
    v = getattr(x, "verdict", x)
    return v.value if isinstance(v, Verdict) else str(v)


def confirmed_verdict(first, rerun) -> str:
    """A single host's change after its interleaved rerun: the same change again confirms it; an equivalent
    rerun refutes it; the opposite change is inconsistent; a rerun still running needs confirmation still, and
    one that ended inconclusive leaves the change unconfirmed: inconclusive."""
    a, b = _verdict(first), _verdict(rerun)
    if a not in ("regression", "improvement"):
        return a
    if b == a:
        return a
    if rerun is None or getattr(rerun, "decided", True) is False:
        return "needs_confirmation"
    return {"equivalent": "equivalent", "inconclusive": "inconclusive"}.get(b, "inconsistent")


def _sku_verdict(verdicts: dict[str, str], per_host: dict, confirmations: dict) -> str:
    decided = {h: v for h, v in verdicts.items() if v != NO_EVIDENCE}
    reg = [h for h, v in decided.items() if v == "regression"]
    imp = [h for h, v in decided.items() if v == "improvement"]
    if not decided:
        return NO_EVIDENCE
    if len(decided) == 1:
        ((h, v),) = decided.items()
        if v == "equivalent":
            return v
        return confirmed_verdict(per_host[h], confirmations[h]) if h in confirmations else "needs_confirmation"
    for mine, other, word in ((reg, imp, "regression"), (imp, reg, "improvement")):
        if len(mine) >= 2 and not other and len(mine) > len(decided) / 2:
            return word
    return "inconsistent" if reg or imp else "equivalent"


def fleet_verdict(
    per_host: dict, skus: dict[str, str], *, confirmations: dict | None = None, suspects=()
) -> tuple[str, dict]:
    """(verdict, detail) of one series and metric over the fleet; the rules are the module's docstring.

    detail: {"skus": {sku: {"verdict", "hosts": {host: verdict}}}, "regressed_on": [sku], "improved_on":
    [sku], "confirm": [hosts whose change awaits an interleaved rerun], "excluded": [suspect hosts left out],
    "reason": one sentence}."""
    confirmations = confirmations or {}
    by_sku: dict[str, dict[str, str]] = {}
    excluded = sorted(h for h in per_host if h in set(suspects))
    for h, x in per_host.items():
        if h not in excluded:
            by_sku.setdefault(skus.get(h) or f"unknown SKU ({h})", {})[h] = _verdict(x)
    out = {
        s: {"verdict": _sku_verdict(v, per_host, confirmations), "hosts": dict(sorted(v.items()))}
        for s, v in sorted(by_sku.items())
    }
    found = [s["verdict"] for s in out.values()]
    verdict = next((w for w in ORDER if w in found), NO_EVIDENCE)
    confirm = sorted(
        h
        for s in out.values()
        if s["verdict"] == "needs_confirmation"
        for h, v in s["hosts"].items()
        if v in ("regression", "improvement")
    )
    reason = (
        "; ".join(
            f"{s}: {d['verdict']} (" + ", ".join(f"{h} {v}" for h, v in d["hosts"].items()) + ")"
            for s, d in out.items()
        )
        or "no host"
    )
    return verdict, {
        "skus": out,
        "regressed_on": [s for s, d in out.items() if d["verdict"] == "regression"],
        "improved_on": [s for s, d in out.items() if d["verdict"] == "improvement"],
        "confirm": confirm,
        "excluded": excluded,
        "reason": reason,
    }


# -------------------------------------------------------------------------------------------- storage


def suspect_key(row: PeerTest, campaign_id: int | None) -> str:
    return f"{'campaign ' + str(campaign_id) if campaign_id is not None else 'adhoc'}:{row.host}:{row.series_id}:{row.metric}"


def save_suspects(session: Session, rows: list[PeerTest], campaign_id: int | None = None) -> int:
    """Store the rows, one per key (campaign, host, series, metric); again: updated, not doubled, and a cleared
    row stays cleared. Returns how many were new."""
    keys = {suspect_key(r, campaign_id): r for r in rows}
    have = (
        {s.key: s for s in session.scalars(select(SuspectHost).where(SuspectHost.key.in_(list(keys))))} if keys else {}
    )
    for k, r in keys.items():
        values = dict(
            host=r.host,
            sku=r.sku,
            campaign_id=campaign_id,
            series=r.series,
            metric=r.metric,
            ratio=_finite(r.ratio),
            ci_low=_finite(r.ci_low),
            ci_high=_finite(r.ci_high),
            peers=list(r.peers),
            job_ids=list(r.job_ids),
            reason=r.reason,
        )
        if k in have:
            for name, v in values.items():
                setattr(have[k], name, v)
        else:
            session.add(SuspectHost(key=k, **values))
    session.flush()
    return len(set(keys) - set(have))


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def list_suspects(session: Session, active_only: bool = True) -> list[dict]:
    """Suspect-host rows, newest first, as dicts (the table's columns)."""
    q = select(SuspectHost).order_by(SuspectHost.created_at.desc(), SuspectHost.id.desc())
    if active_only:
        q = q.where(SuspectHost.cleared_at.is_(None))
    cols = [c.name for c in SuspectHost.__table__.columns]
    return [{c: getattr(s, c) for c in cols} for s in session.scalars(q)]


def clear_suspects(session: Session, host: str) -> int:
    """Mark a host's active rows cleared (it was fixed); returns how many."""
    rows = list(session.scalars(select(SuspectHost).where(SuspectHost.host == host, SuspectHost.cleared_at.is_(None))))
    for r in rows:
        r.cleared_at = utcnow()
    return len(rows)


def worker_points(session: Session, sweep_ids) -> list[Point]:
    """The sweeps' successful results as points whose ``host`` is the worker that ran them (the hosts table's
    name, which ``sku_of`` and the campaign use), not the machine's hostname the environment recorded."""
    out = []
    for sid in sweep_ids:
        for s in load_stored(session, sid):
            if s.result.status == "ok":
                p = to_point(s.job, s.result, s.host, s.created_at)
                p.host = s.worker or p.host
                out.append(p)
    return out


__all__ = [
    "SUSPECT_ALPHA",
    "PeerTest",
    "clear_suspects",
    "confirmed_verdict",
    "fleet_verdict",
    "list_suspects",
    "peer_tests",
    "save_suspects",
    "series_level",
    "sku_of",
    "suspect_hosts",
    "worker_points",
]
