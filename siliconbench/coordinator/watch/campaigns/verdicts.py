"""The end of a campaign: suspect hosts, each series' fleet verdict, findings and the notifications they send.

Suspect hosts (``peers.suspect_hosts``: a host slower than its SKU peers beyond their noise, per metric, over the
campaign's series at each version) are stored with the campaign's id, announced once per host
(``suspect_host``), and left out of every fleet verdict. Each series and metric then gets
``peers.fleet_verdict`` over the hosts' sequential decisions, with SKUs from the hosts table. A *regression* or
*improvement* is stored as a finding (table ``findings``, so ``siliconbench regressions``, ``confirm`` and the
dashboard's Regressions page show it) and queued as a ``finding`` notification to the watch's webhook. Its
ratio and 95% CI pool the changed hosts' processes (each host up to where its decision stopped).

A change seen on the only host of its SKU is *needs_confirmation*: the campaign then runs one confirmation
sweep, the suite again on those hosts, interleaved, ``COMPARE_PROCESSES`` (15) fresh processes a side (the
fixed design, ``significance.compare_processes``), and ``peers.confirmed_verdict`` decides with it. A change
the rerun finds equivalent is equivalent, one it leaves inconclusive is inconclusive (never "no change"); one
still unresolved stays ``needs_confirmation`` in the verdicts, with no finding.
"""

from __future__ import annotations

import shlex

from sqlalchemy import select
from sqlalchemy.orm import Session

from siliconbench.contract.jobs import digest

from siliconbench.coordinator.fleet.peers import fleet_verdict, save_suspects, suspect_hosts
from siliconbench.coordinator.history.points import changed_components, series_key
from siliconbench.coordinator.stats.significance import compare_processes
from siliconbench.coordinator.watch.campaigns.looks import Series, decision_dict
from siliconbench.coordinator.watch.notify import queue_notification
from siliconbench.storage.tables import Finding
from siliconbench.storage.watch_tables import Campaign

CHANGES = ("regression", "improvement")


def find_suspects(
    session: Session, c: Campaign, points, skus: dict[str, str], metrics, webhook: str | None
) -> list[str]:
    """Store and announce the campaign's suspect hosts; their names."""
    rows = [t for m in metrics for t in suspect_hosts(points, skus, m)]
    save_suspects(session, rows, campaign_id=c.id)
    for host in sorted({t.host for t in rows}):
        worst = min((t for t in rows if t.host == host and t.ratio is not None), key=lambda t: t.ratio, default=None)
        if worst is None:
            continue
        queue_notification(
            session,
            kind="suspect_host",
            key=f"campaign {c.id}:suspect:{host}",
            url=webhook,
            payload={
                "host": host,
                "sku": worst.sku,
                "series": worst.series,
                "metric": worst.metric,
                "ratio": worst.ratio,
                "ci_low": worst.ci_low,
                "ci_high": worst.ci_high,
                "peers": list(worst.peers),
                "campaign_id": c.id,
                "watch": c.watch,
                "reason": worst.reason,
                "command": f"siliconbench compare -b host={worst.peers[0]} -c host={host} -m {worst.metric}"
                if worst.peers
                else None,
            },
        )
    return sorted({t.host for t in rows})


def confirmations(s: Series, hosts: list[str], confirm: dict[tuple[str, str], Series] | None) -> dict:
    """{host: Comparison} from the confirmation sweep's processes of this series, for the hosts it ran on."""
    if not confirm or (s.series_id, s.metric) not in confirm:
        return {}
    again = confirm[(s.series_id, s.metric)]
    return {h: compare_processes(*again.sides[h], s.metric) for h in hosts if h in again.sides}


def pooled(s: Series, per_host: dict, hosts: list[str]):
    """One comparison over the changed hosts' processes, each host's cut where its decision stopped."""
    base, cand = [], []
    for h in hosts:
        n = per_host[h].processes
        b, c = s.sides.get(h, ([], []))
        base += b[:n]
        cand += c[:n]
    return compare_processes(base, cand, s.metric)


def series_verdict(s: Series, per_host: dict, skus: dict, suspects: list[str], confirm=None) -> dict:
    conf = confirmations(s, list(per_host), confirm)
    verdict, detail = fleet_verdict(per_host, skus, confirmations=conf, suspects=suspects)
    out = {
        "series_id": s.series_id,
        "verdict": verdict,
        "detail": detail,
        "hosts": {h: decision_dict(d) for h, d in sorted(per_host.items())},
        "confirmations": {h: c.as_dict() for h, c in conf.items()},
    }
    if verdict in CHANGES:
        skus_changed = detail["regressed_on"] if verdict == "regression" else detail["improved_on"]
        changed = sorted(h for sku in skus_changed for h, v in detail["skus"][sku]["hosts"].items() if v == verdict)
        comp = pooled(s, per_host, changed)
        out.update(
            changed_hosts=changed,
            skus=skus_changed,
            ratio=comp.ratio,
            ci_low=comp.ci_low,
            ci_high=comp.ci_high,
            p_value=comp.p_value,
            comparison=comp.as_dict(),
        )
    return out


def save_finding(session: Session, c: Campaign, s: Series, v: dict) -> int:
    """The change as a finding (once per campaign, series and metric); its id."""
    key = digest({"campaign": c.id, "series": s.series_id, "metric": s.metric})
    f = session.scalars(select(Finding).where(Finding.key == key)).one_or_none()
    if f is None:
        first = v["changed_hosts"][0]
        before, after = s.points[first][0][0], s.points[first][1][0]
        f = Finding(
            key=key,
            series_id=s.series_id,
            series=s.label,
            series_key=series_key(after, s.metric, ("host",)),
            metric=s.metric,
            verdict=v["verdict"],
            host=None,
            engine=after.engine,
            model=after.model,
            before_job_id=before.job_id,
            after_job_id=after.job_id,
            before=before.components,
            after=after.components,
            changes=changed_components(before, after),
            ratio=v["ratio"],
            p_value=v["p_value"],
            status="open",
            comparison={**v["comparison"], "campaign_id": c.id, "hosts": v["hosts"]},
        )
        session.add(f)
        session.flush()
    return f.id


def announce(session: Session, c: Campaign, s: Series, v: dict, finding_id: int, webhook: str | None) -> None:
    hosts = " ".join(f"--host {shlex.quote(h)}" for h in v["changed_hosts"])
    queue_notification(
        session,
        kind="finding",
        key=f"campaign {c.id}:{s.label}:{s.metric}",
        url=webhook,
        payload={
            "watch": c.watch,
            "campaign_id": c.id,
            "package": c.package,
            "engine": c.engine,
            "baseline": c.baseline,
            "candidate": c.candidate,
            "series": s.label,
            "metric": s.metric,
            "verdict": v["verdict"],
            "ratio": v["ratio"],
            "ci_low": v["ci_low"],
            "ci_high": v["ci_high"],
            "p_value": v["p_value"],
            "hosts": v["changed_hosts"],
            "sku": ", ".join(v["skus"]),
            "finding_id": finding_id,
            "command": f"siliconbench confirm {finding_id} {hosts}",
        },
    )


def needing_confirmation(verdicts: dict) -> list[str]:
    return sorted(
        {
            h
            for by_metric in verdicts.values()
            for v in by_metric.values()
            if v["verdict"] == "needs_confirmation"
            for h in v["detail"]["confirm"]
        }
    )


def conclude(
    session: Session,
    c: Campaign,
    series: dict,
    decided: dict,
    points,
    skus: dict,
    metrics,
    webhook: str | None,
    confirm: dict | None = None,
) -> dict:
    """{label: {metric: verdict dict}}, suspects stored and announced; findings only once ``final``."""
    suspects = find_suspects(session, c, points, skus, metrics, webhook)
    out: dict[str, dict] = {}
    for key, s in sorted(series.items(), key=lambda kv: (kv[1].label, kv[1].metric)):
        out.setdefault(s.label, {})[s.metric] = series_verdict(s, decided[key], skus, suspects, confirm)
    return {"series": out, "suspects": suspects}


def publish(session: Session, c: Campaign, series: dict, verdicts: dict, webhook: str | None) -> int:
    """Findings and their notifications for every change; how many."""
    n = 0
    for s in series.values():
        v = verdicts["series"].get(s.label, {}).get(s.metric)
        if v and v["verdict"] in CHANGES:
            v["finding_id"] = save_finding(session, c, s, v)
            announce(session, c, s, v, v["finding_id"], webhook)
            n += 1
    return n
