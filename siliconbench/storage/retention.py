"""Retention of raw samples: delete the samples of old results whose summaries are stored, and nothing else.

A result row, its summaries and its job are never deleted, so every history, comparison and dashboard
series keeps the result (from its summaries: siliconbench.storage.summaries). Kept whatever their age: the samples of
a finding's evidence (its before and after results) and of the jobs of a confirmation sweep, which a
finding's verdict was read from. A sample goes only when a summary of its job and metric exists (a
metric measured only in warmups has none, so its warmups stay).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import and_, delete, exists, select, union
from sqlalchemy.orm import Session

from .tables import Finding, Job, Result, ResultSummary, SampleRow, utcnow


def evidence():
    """Job ids whose samples a finding rests on: its before and after results and its confirmation sweep's jobs."""
    return union(
        select(Finding.before_job_id),
        select(Finding.after_job_id),
        select(Job.id).where(
            Job.sweep_id.in_(select(Finding.confirm_sweep_id).where(Finding.confirm_sweep_id.is_not(None)))
        ),
    )


def prune_samples(session: Session, keep_days: float, now: datetime | None = None) -> int:
    """Delete raw samples of results stored more than ``keep_days`` ago that have summaries; returns how many."""
    if keep_days < 0:
        raise ValueError(f"keep_days must be >= 0, not {keep_days}")
    cutoff = (now or utcnow()) - timedelta(days=keep_days)
    old = select(Result.job_id).where(Result.created_at < cutoff, Result.job_id.not_in(evidence()))
    summarized = exists().where(
        and_(ResultSummary.job_id == SampleRow.job_id, ResultSummary.metric == SampleRow.metric)
    )
    res = session.execute(
        delete(SampleRow).where(SampleRow.job_id.in_(old), summarized).execution_options(synchronize_session=False)
    )
    return res.rowcount
