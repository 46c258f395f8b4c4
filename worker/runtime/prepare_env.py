"""A campaign's candidate prepared on this worker: make its engine environment, then say so in the database.

The coordinator sends ``TASK_PREPARE_ENV`` to each target host's queue with one JSON object::

    {"campaign_id": 7, "requirement": "mlx-lm==0.32.2", "extra": [], "find_links": "/srv/wheels", "index_url": null}

and enqueues the campaign's suite only once every host has reported (``storage.campaign_hosts``). The
environment is made as ``siliconbench env add`` makes it (``worker.envs.venvs.add``: the wheel cache reused,
idempotent, so a redelivered task reports ready again). Whatever goes wrong is the campaign's error on this
host, recorded as ``failed`` with its reason, never the worker's crash; only an unreachable database is
waited out, as every other write of the worker is.
"""

from __future__ import annotations

import logging
import subprocess

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError

from siliconbench.errors import UserError

from storage.campaign_hosts import report_env
from storage.database import session_scope
from storage.outages import DATABASE_DOWN, call_through
from storage.tables import Host
from worker.envs import venvs as envs
from worker.runtime import outages
from worker.runtime.registration import capabilities
from worker.runtime.task import WorkerContext

log = logging.getLogger(__name__)
FIELDS = {"campaign_id", "requirement", "extra", "find_links", "index_url"}


def check_payload(payload: object) -> tuple[int | None, str | None]:
    """(campaign id, why the payload is malformed): checked before anything is installed. No usable id: the
    message can only be refused; an id with a bad field: that is the campaign's error on this host."""
    if not isinstance(payload, dict):
        return None, f"the payload is {type(payload).__name__}, not a JSON object"
    cid = payload.get("campaign_id")
    if not isinstance(cid, int) or isinstance(cid, bool) or cid <= 0:
        return None, f"campaign_id {cid!r} is not a positive integer"
    unknown = sorted(set(payload) - FIELDS)
    if unknown:
        return cid, f"unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(FIELDS))})"
    if not isinstance(payload.get("requirement"), str) or not payload["requirement"].strip():
        return cid, "requirement must be a string such as mlx-lm==0.32.2"
    extra = payload.get("extra") or []
    if not isinstance(extra, list) or not all(isinstance(e, str) for e in extra):
        return cid, "extra must be a list of requirement strings"
    for key in ("find_links", "index_url"):
        if payload.get(key) is not None and not isinstance(payload[key], str):
            return cid, f"{key} must be a string or null"
    return cid, None


def _report(ctx: WorkerContext, campaign_id: int, **fields) -> None:
    def once():
        with session_scope(ctx.database_url) as s:
            report_env(s, campaign_id, ctx.name, **fields)

    call_through(once, outages.DATABASE, outages=DATABASE_DOWN)


def _advertise(ctx: WorkerContext) -> None:
    """Refresh this host's engine versions, so placement sees the new environment before the next restart."""
    engines, _models = capabilities(ctx.models_dir)

    def once():
        with session_scope(ctx.database_url) as s:
            s.execute(
                update(Host)
                .where(Host.name == ctx.name)
                .values(engines=[{"name": e, "version": v} for e, v in engines.items()])
            )

    call_through(once, outages.DATABASE, outages=DATABASE_DOWN)


def _install(payload: dict) -> envs.EngineEnv:
    return envs.add(
        payload["requirement"],
        extra=payload.get("extra") or [],
        find_links=payload.get("find_links"),
        index_url=payload.get("index_url"),
        progress=lambda msg: log.info("prepare: %s", msg),
    )


def prepare_env(ctx: WorkerContext, payload: dict) -> str:
    """Make the campaign's environment here and report it; what happened, for logs and tests."""
    cid, why = check_payload(payload)
    if cid is None:  # nothing to report against: a log line, the message dropped
        log.error("refused a malformed prepare_env message: %s: %r", why, payload)
        return f"refused: {why}"
    try:
        _report(ctx, cid, status="pending")
    except IntegrityError:  # the campaign is gone (or never was): nothing to prepare for
        log.error("prepare_env: no campaign %s in the database; message dropped", cid)
        return f"refused: no campaign {cid}"
    if why is not None:
        _report(ctx, cid, status="failed", error=f"malformed prepare_env message: {why}")
        return "failed"
    try:
        env = _install(payload)
    except UserError as exc:  # a bad requirement, pip's failure, an environment that cannot run a job
        error = str(exc)
    except subprocess.TimeoutExpired as exc:
        error = f"installing {payload['requirement']} took over {exc.timeout:.0f} s and was stopped"
    except Exception as exc:  # anything else is still this host's error for the campaign, not a crash
        log.exception("prepare_env %s failed", payload["requirement"])
        error = f"{type(exc).__name__}: {exc}"
    else:
        try:
            _advertise(ctx)
        except Exception as exc:  # the environment is made; placement sees it at the worker's next start
            log.warning("could not refresh %s's engine versions: %s", ctx.name, exc)
        _report(ctx, cid, status="ready", env_name=env.name, packages=env.packages)
        log.info("campaign %s: %s ready (%s)", cid, env.name, ", ".join(f"{k} {v}" for k, v in env.packages.items()))
        return "ready"
    log.warning("campaign %s: %s failed here: %s", cid, payload["requirement"], (error.splitlines() or [""])[0])
    _report(ctx, cid, status="failed", error=error)
    return "failed"
