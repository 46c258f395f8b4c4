"""Task and queue names and the Celery settings both sides use. JSON only: a pickle is refused.

Routing: every worker consumes its own host queue (``host.<name>``, for ``placement: each``) plus
one capability queue per (engine, model) it can run (``cap.<engine>.<model>``, for ``placement:
any``), so a job only ever reaches a machine that has its engine and its model.
"""

from __future__ import annotations

from .settings import env_setting

TASK_RUN_JOB = "siliconbench.run_job"
TASK_NOOP = "siliconbench.noop"  # the plumbing benchmark's no-engine workload
# A worker makes a campaign candidate's engine environment (args: one JSON object, siliconbench.worker.runtime.prepare_env).
TASK_PREPARE_ENV = "siliconbench.prepare_env"
# The watch's periodic work (Celery beat -> the coordinator's scheduler queue): look at the index, drive
# campaigns, deliver notifications. Mac workers never consume this queue.
TASK_WATCH_TICK = "siliconbench.watch_tick"
SCHEDULER_QUEUE = "siliconbench.scheduler"

# Above the longest job a sweep may allow (spec timeout_s); crash recovery is the reconciler's job,
# never this timeout's: a shorter one re-runs healthy jobs (measured: 3 runs of one 40 s job).
MAX_JOB_TIMEOUT_S = 6 * 3600
VISIBILITY_TIMEOUT_S = MAX_JOB_TIMEOUT_S + 1800

# How long a claimed job's lease lasts without renewal; the worker renews it every third of that.
# SILICONBENCH_LEASE_S shortens it (tests of crash recovery); it must be the same on every machine.
LEASE_S = env_setting("lease_s")
# A job is failed with its reason after this many of its own failed attempts (crashes, timeouts retried).
MAX_ATTEMPTS = 3
# Claims that ended because the worker died or lost the database (its lease expired) are not the job's
# failures: they have their own, larger bound, which still stops a job that really takes its worker down.
MAX_INTERRUPTIONS = 10
# Heartbeats: written every HEARTBEAT_S; a host is online while its last one is younger than ONLINE_S.
# SILICONBENCH_HEARTBEAT_S shortens it (tests that wait for a worker to see the database come back or flush
# its spool, which happen on a heartbeat); above ONLINE_S a live worker would show offline, so it is capped.
ONLINE_S = 20
HEARTBEAT_S = min(env_setting("heartbeat_s"), ONLINE_S / 2)


def host_queue(name: str) -> str:
    return f"host.{name}"


def capability_queue(engine: str, model: str) -> str:
    return f"cap.{engine}.{model}"


def celery_settings(broker_url: str) -> dict:
    """The Celery configuration of the coordinator's producer and of every worker."""
    return {
        "broker_url": broker_url,
        "task_serializer": "json",
        "accept_content": ["json"],
        "result_serializer": "json",
        "event_serializer": "json",
        "result_backend": None,  # PostgreSQL holds job state and results, not Celery
        "task_ignore_result": True,
        "task_acks_late": True,  # a message is acked only after its job is recorded
        "task_reject_on_worker_lost": True,
        # A job that keeps killing its worker process is retried a bounded number of times, not forever.
        "task_retry_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,  # one job at a time, none held back from other Macs
        "worker_concurrency": 1,
        "broker_transport_options": {"visibility_timeout": VISIBILITY_TIMEOUT_S},
        "broker_connection_retry_on_startup": True,
        # Retry a lost broker forever: Celery's default (100 retries, 2..30 s apart) ends a worker ~49 min
        # into an outage. Only the worker's consumer reads it; a producer's publish has its own policy.
        "broker_connection_retry": True,
        "broker_connection_max_retries": None,
        # Off: a network blip must not cancel a running benchmark (it would never come back).
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "task_default_queue": "default",
        "worker_hijack_root_logger": False,
    }
