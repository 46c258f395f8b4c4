"""Tables of the regression watch (0008): watches, their checks, the campaigns a new release becomes, each
target host's engine environment for it, suspect hosts, and the notification outbox.

Kept apart from ``siliconbench.storage.tables`` (the benchmark's own records) but on the same ``Base``: migrations create
them, ``siliconbench/migrations/env.py`` and the schema test import this module so autogenerate sees them.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, CheckConstraint, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from .tables import Base, BigIntPK, UTCDateTime, _created, _in

CAMPAIGN_STATUSES = ("preparing", "running", "done", "failed")
CAMPAIGN_HOST_STATUSES = ("pending", "ready", "failed")
NOTIFICATION_KINDS = ("finding", "suspect_host", "campaign_failed", "bisection")


class Watch(Base):
    """A watch, declared once (``siliconbench watch add``): its validated YAML document as JSON."""

    __tablename__ = "watches"

    name: Mapped[str] = mapped_column(String, primary_key=True)
    spec: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = _created()
    last_checked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class WatchCheck(Base):
    """One look at the package index for a watch: who made it, when, and what it found (the lock's evidence)."""

    __tablename__ = "watch_checks"
    __table_args__ = (Index("ix_watch_checks_watch_started_at", "watch", "started_at"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    watch: Mapped[str] = mapped_column(ForeignKey("watches.name", ondelete="CASCADE"))
    checker: Mapped[str] = mapped_column(String)  # "HOST pid PID": which scheduler's task ran it
    started_at: Mapped[datetime] = _created()
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    versions: Mapped[dict] = mapped_column(JSON, default=dict)  # package -> versions the index offered
    new_campaigns: Mapped[list] = mapped_column(JSON, default=list)
    error: Mapped[str | None] = mapped_column(Text)


class WatchVersion(Base):
    """A version of a followed package the watch has seen; ``campaign_id`` is the campaign it became, if any."""

    __tablename__ = "watch_versions"

    watch: Mapped[str] = mapped_column(ForeignKey("watches.name", ondelete="CASCADE"), primary_key=True)
    package: Mapped[str] = mapped_column(String, primary_key=True)
    version: Mapped[str] = mapped_column(String, primary_key=True)
    first_seen_at: Mapped[datetime] = _created()
    campaign_id: Mapped[int | None] = mapped_column(Integer)


class Campaign(Base):
    """A new release benchmarked against the last version with history, on the watch's hosts."""

    __tablename__ = "campaigns"
    __table_args__ = (
        CheckConstraint(_in("status", CAMPAIGN_STATUSES), name="status"),
        Index("ix_campaigns_watch_package_candidate", "watch", "package", "candidate", unique=True),
        Index("ix_campaigns_status", "status"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    watch: Mapped[str] = mapped_column(ForeignKey("watches.name", ondelete="CASCADE"))
    package: Mapped[str] = mapped_column(String)
    engine: Mapped[str] = mapped_column(String)
    baseline: Mapped[str] = mapped_column(String)
    candidate: Mapped[str] = mapped_column(String)
    status: Mapped[str] = mapped_column(String, default="preparing", server_default="preparing")
    hosts: Mapped[list] = mapped_column(JSON, default=list)  # the target hosts, chosen when it was made
    look: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # looks enqueued so far
    sweep_ids: Mapped[list] = mapped_column(JSON, default=list)  # one sweep per look
    verdicts: Mapped[dict] = mapped_column(JSON, default=dict)  # series -> metric -> per-host and fleet verdict
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class CampaignHost(Base):
    """One target host's engine environment for a campaign's candidate, as the worker reported it."""

    __tablename__ = "campaign_hosts"
    __table_args__ = (CheckConstraint(_in("status", CAMPAIGN_HOST_STATUSES), name="status"),)

    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True)
    host: Mapped[str] = mapped_column(String, primary_key=True)
    status: Mapped[str] = mapped_column(String, default="pending", server_default="pending")
    env_name: Mapped[str | None] = mapped_column(String)
    packages: Mapped[dict] = mapped_column(JSON, default=dict)
    error: Mapped[str | None] = mapped_column(Text)
    reported_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    request: Mapped[str | None] = mapped_column(String)  # what the host was asked to make (a build's ref), echoed


class SuspectHost(Base):
    """A host whose series disagree with its SKU peers' beyond their noise (same version, same configuration)."""

    __tablename__ = "suspect_hosts"
    __table_args__ = (Index("ix_suspect_hosts_key", "key", unique=True), Index("ix_suspect_hosts_host", "host"))

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String)  # idempotent: one row per (campaign or source, host, series, metric)
    host: Mapped[str] = mapped_column(String)
    sku: Mapped[str] = mapped_column(String)
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    series: Mapped[str] = mapped_column(String)
    metric: Mapped[str] = mapped_column(String)
    ratio: Mapped[float | None] = mapped_column(Float)  # host / peers
    ci_low: Mapped[float | None] = mapped_column(Float)
    ci_high: Mapped[float | None] = mapped_column(Float)
    peers: Mapped[list] = mapped_column(JSON, default=list)
    job_ids: Mapped[list] = mapped_column(JSON, default=list)  # the results it marks
    reason: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = _created()
    cleared_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Notification(Base):
    """The outbox: a verdict to deliver, kept until the receiver took it (retried with backoff)."""

    __tablename__ = "notifications"
    __table_args__ = (
        CheckConstraint(_in("kind", NOTIFICATION_KINDS), name="kind"),
        Index("ix_notifications_key", "key", unique=True),
        Index("ix_notifications_delivered_at_next_attempt_at", "delivered_at", "next_attempt_at"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String)  # idempotent: the same verdict is queued once
    kind: Mapped[str] = mapped_column(String)
    url: Mapped[str | None] = mapped_column(String)  # the webhook; None: dashboard and CLI only
    payload: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = _created()
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)


BISECTION_STATUSES = ("building", "measuring", "done", "failed")


class Bisection(Base):
    """A regression searched to its llama.cpp commit: on the fleet (``runner`` fleet: a confirmed regression
    between two tags, on the host that confirmed it, stepped by the scheduler, ``siliconbench.coordinator.watch.bisections``) or
    on one machine (``runner`` local: ``siliconbench regressions bisect``, ``siliconbench.embedded.bisect``). Both keep the
    search's state machine in ``search`` (``siliconbench.coordinator.bisection.search.Search.as_dict``); the columns beside
    it (lo, hi, skipped, steps, outcome, first_bad, effect) are copied from it for the queries that read them."""

    __tablename__ = "bisections"
    __table_args__ = (
        CheckConstraint(_in("status", BISECTION_STATUSES), name="status"),
        Index("ix_bisections_finding_id", "finding_id"),
        Index("ix_bisections_status", "status"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))  # fleet only
    finding_id: Mapped[int | None] = mapped_column(Integer)  # the regression it searches (the watch: one a finding)
    runner: Mapped[str] = mapped_column(String, default="fleet", server_default="fleet")  # fleet | local
    search: Mapped[dict | None] = mapped_column(JSON)  # the state machine: what is measured next, every rule's input
    options: Mapped[dict | None] = mapped_column(JSON)  # local: the checkout's build tools and cmake flags
    host: Mapped[str] = mapped_column(String)  # where it runs: a host that confirmed the regression
    source: Mapped[str] = mapped_column(String)  # the llama.cpp checkout
    metric: Mapped[str] = mapped_column(String)
    min_effect: Mapped[float] = mapped_column(Float)
    suite: Mapped[dict] = mapped_column(JSON, default=dict)  # the finding's series as a sweep: each step's base
    good: Mapped[dict] = mapped_column(JSON, default=dict)  # {label, sha, number, subject}
    bad: Mapped[dict] = mapped_column(JSON, default=dict)
    commits: Mapped[list] = mapped_column(JSON, default=list)  # after good up to bad, oldest first
    lo: Mapped[int] = mapped_column(Integer, default=-1, server_default="-1")  # last known good (-1: good)
    hi: Mapped[int] = mapped_column(Integer)  # first known bad (an index into commits)
    labels: Mapped[dict] = mapped_column(JSON, default=dict)  # commit index -> the build's version label
    skipped: Mapped[list] = mapped_column(JSON, default=list)  # {index, reason}: did not build or run
    status: Mapped[str] = mapped_column(String, default="building", server_default="building")
    current: Mapped[dict] = mapped_column(JSON, default=dict)  # the step under way
    steps: Mapped[list] = mapped_column(JSON, default=list)  # every finished step's evidence
    outcome: Mapped[str | None] = mapped_column(
        String
    )  # found | ambiguous | equivalent | improvement | inconclusive | failed
    first_bad: Mapped[dict | None] = mapped_column(JSON)
    effect: Mapped[dict | None] = mapped_column(JSON)  # last good -> first bad (or the ends), with its interval
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
