"""Watches, declared once: add / get / list / remove, which are due, and a check of the package index.

A check (``check_watch``) records one ``watch_checks`` row and every version the index offered in
``watch_versions``. A package's first check records what is there as seen, with no campaign: history is not
back-filled. Later, each version not seen before and newer than the newest seen becomes a ``campaigns`` row
(status preparing; baseline and hosts from ``siliconbench.coordinator.watch.campaigns.baselines``) and its version row points at it. A
new version older than the newest seen (a backport) is recorded, with no campaign. The unique
(watch, package, candidate) index and ON CONFLICT DO NOTHING make a repeated or concurrent check create a
campaign once. The index is read before anything is written, so no row lock waits on the HTTP call; one
check at a time fleet-wide is the scheduler's lock (``siliconbench.coordinator.watch.scheduler``), taken around ``due`` and
``check_watch``.
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from datetime import datetime, timedelta
from functools import partial

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from siliconbench.contract.errors import UserError
from siliconbench.contract.settings import load_settings
from siliconbench.contract.watch_spec import LLAMA_CPP, PACKAGE_ENGINE, WatchSpec, parse_watch, version_key

from siliconbench.coordinator.watch import llama_tags, package_index
from siliconbench.coordinator.watch.campaigns.baselines import BASELINE_REASON, choose_baseline, target_hosts
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import utcnow
from siliconbench.storage.watch_tables import Campaign, Watch, WatchCheck, WatchVersion


def add(session: Session, spec: WatchSpec, *, replace: bool = False) -> str:
    """Store a watch: 'added', 'unchanged' (the same spec again) or 'replaced' (``replace``: a new spec under the
    name keeps its versions seen and its campaigns). A different spec without ``replace`` is a UserError."""
    row = session.get(Watch, spec.name)
    stored = spec.stored()
    if row is None:
        session.add(Watch(name=spec.name, spec=stored))
        return "added"
    if row.spec == stored:
        return "unchanged"
    if not replace:
        raise UserError(
            "name",
            f"a watch named {spec.name!r} exists with a different spec; pass --replace to "
            "replace it (its versions seen and campaigns are kept).",
        )
    row.spec = stored
    return "replaced"


def get(session: Session, name: str) -> WatchSpec:
    row = session.get(Watch, name)
    if row is None:
        raise UserError(
            "NAME", f"no watch named {name!r}.", session.scalars(select(Watch.name).order_by(Watch.name)).all()
        )
    return parse_watch(row.spec, check_folders=False)


def remove(session: Session, name: str) -> None:
    """Delete a watch with its checks, versions seen and campaigns (foreign keys cascade)."""
    get(session, name)
    session.execute(delete(Watch).where(Watch.name == name))


def selector_of(spec: WatchSpec):
    """The hosts selector in force, as written: the watch's own, else its suite's."""
    return spec.hosts if spec.hosts is not None else spec.suite.get("hosts", "all")


def list_watches(session: Session) -> list[dict]:
    """Every watch as a plain dict: name, packages, every, hosts, index, last_checked_at, campaigns (count)."""
    counts = dict(session.execute(select(Campaign.watch, func.count()).group_by(Campaign.watch)).all())
    out = []
    for row in session.scalars(select(Watch).order_by(Watch.name)):
        spec = parse_watch(row.spec, check_folders=False)
        out.append(
            dict(
                name=row.name,
                packages=list(spec.followed),
                every=spec.every,
                every_s=spec.every_s,
                hosts=selector_of(spec),
                index=", ".join([*([resolved_index(spec)] if spec.packages else []), *_tags_source(spec)]),
                notify=spec.notify.webhook if spec.notify else None,
                last_checked_at=row.last_checked_at,
                campaigns=counts.get(row.name, 0),
            )
        )
    return out


def _tags_source(spec: WatchSpec) -> list[str]:
    """Where a watch reads llama.cpp's tags: its checkout or its archive folder."""
    if spec.llama_cpp is None:
        return []
    return [f"llama.cpp tags: {spec.llama_cpp.source or spec.llama_cpp.archives}"]


def due(session: Session, now: datetime | None = None) -> list[str]:
    """Names of the watches never checked, or last checked at least ``every`` before ``now``."""
    now = now or utcnow()
    out = []
    for name, spec, last in session.execute(select(Watch.name, Watch.spec, Watch.last_checked_at).order_by(Watch.name)):
        every = parse_watch(spec, check_folders=False).every_s
        if last is None or last + timedelta(seconds=every) <= now:
            out.append(name)
    return out


def resolved_index(spec: WatchSpec) -> str:
    """The watch's own index, else SILICONBENCH_PACKAGE_INDEX (read at check time, not frozen into the spec)."""
    return spec.index or load_settings().package_index


def fetch_versions(spec: WatchSpec) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Each followed package's versions on the index (llama.cpp's: its tags), and the error of each package that
    could not be read (a failed ``git fetch`` is an error beside the tags the checkout already had)."""
    index = resolved_index(spec)
    offered, errors = {}, {}
    for package in spec.packages:
        try:
            offered[package] = package_index.versions(package, index)
        except package_index.PackageIndexError as exc:
            errors[package] = str(exc)
    if spec.llama_cpp is not None:
        try:
            offered[LLAMA_CPP], fetch_error = llama_tags.tags(spec.llama_cpp.model_dump())
            if fetch_error:
                errors[LLAMA_CPP] = fetch_error
        except llama_tags.TagsError as exc:
            errors[LLAMA_CPP] = str(exc)
    return offered, errors


def _insert_ignoring_conflict(session: Session, table, index_elements: list[str], values: dict):
    """INSERT ... ON CONFLICT DO NOTHING RETURNING the primary key; None when the row already existed."""
    make = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}[session.get_bind().dialect.name]
    stmt = make(table).values(**values).on_conflict_do_nothing(index_elements=index_elements)
    return session.execute(stmt.returning(*table.primary_key.columns)).first()


def _record_package(session: Session, name: str, spec: WatchSpec, package: str, offered: list[str]) -> list[int]:
    seen = list(
        session.scalars(select(WatchVersion.version).where(WatchVersion.watch == name, WatchVersion.package == package))
    )
    first = not seen
    for v in offered:
        if v not in seen:
            _insert_ignoring_conflict(
                session,
                WatchVersion.__table__,
                ["watch", "package", "version"],
                dict(watch=name, package=package, version=v),
            )
    if first:
        return []
    key = partial(version_key, package)
    newest = max(map(key, seen))
    engine = PACKAGE_ENGINE.get(package, LLAMA_CPP)
    made = []
    new = sorted((v for v in offered if v not in seen and key(v) > newest), key=key)
    if package == LLAMA_CPP:
        # Tags come several a day: the newest is measured against the newest seen, and a regression between
        # them is bisected to its commit, so the tags in between are recorded as seen, not each a campaign.
        new = new[-1:]
    hosts = target_hosts(session, spec, engine) if new else []
    for cand in new:
        baseline, reason = choose_baseline(session, engine, package, cand, seen + [cand])
        error = (
            None
            if hosts
            else (
                f"no online worker offering {engine} matches the watch's hosts "
                f"({selector_of(spec)}) when {package} {cand} appeared"
            )
        )
        row = _insert_ignoring_conflict(
            session,
            Campaign.__table__,
            ["watch", "package", "candidate"],
            dict(
                watch=name,
                package=package,
                engine=engine,
                baseline=baseline,
                candidate=cand,
                hosts=hosts,
                status="failed" if error else "preparing",
                error=error,
                sweep_ids=[],
                verdicts={BASELINE_REASON: reason},
                updated_at=utcnow(),
            ),
        )
        seen.append(cand)  # a second new version's baseline may be this one
        if row is None:
            continue  # another check made it first
        session.execute(
            update(WatchVersion)
            .where(WatchVersion.watch == name, WatchVersion.package == package, WatchVersion.version == cand)
            .values(campaign_id=row[0])
        )
        made.append(row[0])
    return made


def _check(session: Session, name: str, checker: str, index_versions: dict[str, list[str]] | None = None) -> WatchCheck:
    spec = get(session, name)
    started = utcnow()
    if index_versions is None:
        offered, errors = fetch_versions(spec)
    else:
        offered = {p: list(index_versions.get(p, [])) for p in spec.followed}
        errors = {}
    made: list[int] = []
    for package in spec.followed:
        if package in offered:
            made += _record_package(session, name, spec, package, offered[package])
    check = WatchCheck(
        watch=name,
        checker=checker,
        started_at=started,
        finished_at=utcnow(),
        versions=offered,
        new_campaigns=made,
        error="; ".join(errors.values()) or None,
    )
    session.add(check)
    session.execute(update(Watch).where(Watch.name == name).values(last_checked_at=started))
    session.flush()
    return check


def check_watch(
    session: Session, name: str, *, checker: str, index_versions: dict[str, list[str]] | None = None
) -> list[int]:
    """Look at the index for watch ``name`` (or take ``index_versions``, package -> versions, as its answer) and
    record the check; returns the ids of the campaigns it created. An unreadable index is the check's
    ``error``, not an exception; an unknown name is a UserError."""
    return list(_check(session, name, checker, index_versions).new_campaigns)


def this_checker(prefix: str = "cli") -> str:
    return f"{prefix} {socket.gethostname()} pid {os.getpid()}"


def run_check(
    database_url: str, name: str, *, checker: str | None = None, index_versions: dict[str, list[str]] | None = None
) -> dict:
    """One check in its own transaction (``watch run-now``): its id, versions, new campaign ids (and those
    campaigns as ``campaigns`` dicts) and error."""
    with session_scope(database_url) as s:
        c = _check(s, name, checker or this_checker(), index_versions)
        made = [x for x in campaigns(s, name) if x["id"] in c.new_campaigns]
        return dict(
            id=c.id, watch=name, versions=c.versions, new_campaigns=list(c.new_campaigns), campaigns=made, error=c.error
        )


def verdict_summary(verdicts: dict) -> str:
    """'1 regression, 9 no change; 1 suspect host': the campaign driver's ``verdicts["series"][label][metric]``
    (a dict with ``verdict``, or the verdict itself) counted, then its ``suspects``; else its ``phase``."""
    verdicts = verdicts or {}
    counts: Counter = Counter()
    for metrics in (verdicts.get("series") or {}).values():
        for v in (metrics or {}).values():
            label = v.get("verdict") if isinstance(v, dict) else v
            if isinstance(label, str):
                counts[label] += 1
    out = ", ".join(f"{n} {label}" for label, n in counts.most_common())
    suspects = len(verdicts.get("suspects") or [])
    if suspects:
        out += f"; {suspects} suspect host{'s' if suspects > 1 else ''}"
    return out or (f"phase: {verdicts['phase']}" if verdicts.get("phase") else "no verdict yet")


def campaigns(session: Session, watch: str | None = None, limit: int = 200) -> list[dict]:
    """Campaigns, newest first: status, baseline -> candidate, hosts, the verdicts dict and its baseline note."""
    q = select(Campaign).order_by(Campaign.created_at.desc(), Campaign.id.desc()).limit(limit)
    if watch:
        q = q.where(Campaign.watch == watch)
    return [
        dict(
            id=c.id,
            watch=c.watch,
            package=c.package,
            engine=c.engine,
            baseline=c.baseline,
            candidate=c.candidate,
            status=c.status,
            hosts=list(c.hosts or []),
            look=c.look,
            sweep_ids=list(c.sweep_ids or []),
            verdicts=dict(c.verdicts or {}),
            baseline_reason=(c.verdicts or {}).get(BASELINE_REASON),
            summary=verdict_summary(c.verdicts),
            error=c.error,
            created_at=c.created_at,
            updated_at=c.updated_at,
        )
        for c in session.scalars(q)
    ]
