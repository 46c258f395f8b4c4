"""A campaign's candidate prepared on this worker: make its engine environment, then say so in the database.

The coordinator sends ``TASK_PREPARE_ENV`` to each target host's queue with one JSON object::

    {"campaign_id": 7, "requirement": "mlx-lm==0.32.2", "extra": [], "find_links": "/srv/wheels", "index_url": null}

or, for a llama.cpp tag (or a bisection's commit) to build from the checkout, or a release archive to unpack::

    {"campaign_id": 7, "llama_cpp": {"source": "/src/llama.cpp", "ref": "b7123", "fetch": true,
                                     "cmake_flags": [], "tools": ["llama-bench"]}}
    {"campaign_id": 7, "llama_cpp": {"archive": "/srv/llama/llama-b7123-bin-macos-arm64.zip"}}

and enqueues the campaign's suite only once every host has reported (``siliconbench.storage.campaign_hosts``). The
environment is made as ``siliconbench env add`` makes it (``siliconbench.worker.envs.venvs.add``: the wheel cache reused,
idempotent, so a redelivered task reports ready again). Whatever goes wrong is the campaign's error on this
host, recorded as ``failed`` with its reason, never the worker's crash; only an unreachable database is
waited out, as every other write of the worker is.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError

from siliconbench.contract.errors import UserError
from siliconbench.contract.settings import env_setting

from siliconbench.storage.campaign_hosts import report_env
from siliconbench.storage.database import session_scope
from siliconbench.storage.outages import DATABASE_DOWN, call_through
from siliconbench.storage.tables import Host
from siliconbench.worker.builds import compile as compiler, source as sources
from siliconbench.worker.envs import builds, venvs as envs
from siliconbench.worker.runtime import outages
from siliconbench.worker.runtime.registration import capabilities
from siliconbench.worker.runtime.task import WorkerContext

log = logging.getLogger(__name__)
FIELDS = {"campaign_id", "requirement", "extra", "find_links", "index_url", "llama_cpp"}
BUILD_FIELDS = {"source", "ref", "fetch", "cmake_flags", "tools", "archive"}


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
    if "llama_cpp" in payload:
        return cid, _check_build(payload)
    if not isinstance(payload.get("requirement"), str) or not payload["requirement"].strip():
        return cid, "requirement must be a string such as mlx-lm==0.32.2"
    extra = payload.get("extra") or []
    if not isinstance(extra, list) or not all(isinstance(e, str) for e in extra):
        return cid, "extra must be a list of requirement strings"
    for key in ("find_links", "index_url"):
        if payload.get(key) is not None and not isinstance(payload[key], str):
            return cid, f"{key} must be a string or null"
    return cid, None


def _check_build(payload: dict) -> str | None:
    """Why a llama.cpp build request is malformed, or None: a checkout and a ref, or a release archive."""
    build = payload["llama_cpp"]
    if "requirement" in payload:
        return "give either requirement (a package) or llama_cpp (a build), not both"
    if not isinstance(build, dict):
        return "llama_cpp must be an object: {source, ref, fetch, cmake_flags, tools} or {archive}"
    unknown = sorted(set(build) - BUILD_FIELDS)
    if unknown:
        return f"unknown llama_cpp field(s) {', '.join(unknown)} (known: {', '.join(sorted(BUILD_FIELDS))})"
    if isinstance(build.get("archive"), str):
        return None
    if not isinstance(build.get("source"), str) or not isinstance(build.get("ref"), str) or not build["ref"]:
        return "llama_cpp needs source (a checkout's path) and ref (a tag such as b7123), or archive"
    for key in ("cmake_flags", "tools"):
        if not isinstance(build.get(key, []), list) or not all(isinstance(x, str) for x in build.get(key, [])):
            return f"llama_cpp.{key} must be a list of strings"
    return None


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


def _say(msg: str) -> None:
    log.info("prepare: %s", msg)


def checkout_of(build: dict) -> str:
    """The llama.cpp checkout this worker builds from: its own (SILICONBENCH_LLAMA_SOURCE) where it declares one, else
    the path the watch names with `~` as this machine's home."""
    return str(Path(env_setting("llama_source") or build["source"]).expanduser())


def _build(build: dict) -> envs.EngineEnv:
    """llama.cpp at ``ref`` built here (fetched first when this checkout lacks it), or a release archive."""
    if build.get("archive"):
        return builds.add_prebuilt_env(build["archive"], progress=_say)
    source = checkout_of(build)
    if build.get("fetch", True) and not sources.has_ref(source, build["ref"]):
        sources.fetch_tags(source)  # this Mac's checkout has not seen the tag yet
    return builds.add_build(
        source,
        build["ref"],
        cmake_flags=list(build.get("cmake_flags") or []),
        tools=tuple(build.get("tools") or compiler.TOOLS),
        progress=_say,
    )


def _install(payload: dict) -> envs.EngineEnv:
    if "llama_cpp" in payload:
        return _build(payload["llama_cpp"])
    return envs.add(
        payload["requirement"],
        extra=payload.get("extra") or [],
        find_links=payload.get("find_links"),
        index_url=payload.get("index_url"),
        progress=_say,
    )


def _what(payload: dict) -> str:
    build = payload.get("llama_cpp")
    if isinstance(build, dict):
        return f"llama.cpp {build.get('ref') or build.get('archive')}"
    return str(payload.get("requirement"))


def prepare_env(ctx: WorkerContext, payload: dict) -> str:
    """Make the campaign's environment here and report it; what happened, for logs and tests."""
    cid, why = check_payload(payload)
    if cid is None:  # nothing to report against: a log line, the message dropped
        log.error("refused a malformed prepare_env message: %s: %r", why, payload)
        return f"refused: {why}"
    request = _request(payload)
    try:
        _report(ctx, cid, status="pending", request=request)
    except IntegrityError:  # the campaign is gone (or never was): nothing to prepare for
        log.error("prepare_env: no campaign %s in the database; message dropped", cid)
        return f"refused: no campaign {cid}"
    if why is not None:
        _report(ctx, cid, status="failed", error=f"malformed prepare_env message: {why}", request=request)
        return "failed"
    try:
        env = _install(payload)
    except UserError as exc:  # a bad requirement, pip's failure, an environment that cannot run a job
        error = str(exc)
    except subprocess.TimeoutExpired as exc:
        error = f"making {_what(payload)} took over {exc.timeout:.0f} s and was stopped"
    except Exception as exc:  # anything else is still this host's error for the campaign, not a crash
        log.exception("prepare_env %s failed", _what(payload))
        error = f"{type(exc).__name__}: {exc}"
    else:
        try:
            _advertise(ctx)
        except Exception as exc:  # the environment is made; placement sees it at the worker's next start
            log.warning("could not refresh %s's engine versions: %s", ctx.name, exc)
        # A build's version (its tag, or b<N>+<sha> between tags) is reported beside its binding, if any.
        packages = {builds.BUILD_PACKAGE: env.version, **env.packages} if env.build else env.packages
        _report(ctx, cid, status="ready", env_name=env.name, packages=packages, request=request)
        log.info("campaign %s: %s ready (%s)", cid, env.name, ", ".join(f"{k} {v}" for k, v in env.packages.items()))
        return "ready"
    log.warning("campaign %s: %s failed here: %s", cid, _what(payload), (error.splitlines() or [""])[0])
    _report(ctx, cid, status="failed", error=error, request=request)
    return "failed"


def _request(payload: dict) -> str | None:
    """What the message asks to make, echoed in every report: a build's ref (a bisection sends a commit's sha)."""
    build = payload.get("llama_cpp") if isinstance(payload, dict) else None
    if isinstance(build, dict):
        ref = build.get("ref") or build.get("archive")
        return str(ref) if ref else None
    return None
