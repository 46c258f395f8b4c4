"""Two real workers on this machine, one slowed inside the engine's timed calls (harness/throttle), running the same
sweeps round by round: the scenario behind tests/fleet/test_peers.py and benchmarks/suspect_hosts.py."""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from sqlalchemy import select

from siliconbench.contract.spec import parse_sweep

from harness.fleet import ROOT, RedisServer, WorkerProc, wait_for
from siliconbench.coordinator.fleet import sweeps as fleet
from siliconbench.coordinator.fleet.peers import sku_of, suspect_hosts, worker_points
from siliconbench.coordinator.fleet.suspects import peer_tests
from siliconbench.storage import database, roles
from siliconbench.storage.tables import Host

MODEL = "tiny-llama-5m"
THROTTLE_DIR = ROOT / "harness" / "throttle"
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
METRIC = "decode_tps"


def models_folder(given: Path | None) -> Path:
    if given and (given / MODEL / "manifest.json").exists():
        return given
    from siliconbench.worker.models.make.tiny import (
        make_tiny,  # only when no models folder was given: writes the model once
    )

    d = Path(tempfile.mkdtemp(prefix="sb-suspect-models-"))
    make_tiny(d, name=MODEL, hidden_size=256, n_layers=4, n_heads=4, n_kv_heads=2, seed=0)
    return d


def _done(url: str, sweep_id: str) -> dict | None:
    with database.session_scope(url) as s:
        prog = fleet.progress(s, sweep_id)
    return None if sum(c.get("queued", 0) + c.get("running", 0) for c in prog.values()) else prog


def sweep_spec(gen: tuple[int, ...], prompt: int, repetitions: int):
    # threads 1: the two workers share this machine's cores; each job keeps to one, so neither slows the other
    return parse_sweep(
        {
            "name": "suspect-hosts",
            "models": [MODEL],
            "engines": ["llama.cpp"],
            "processes": 1,
            "repetitions": repetitions,
            "warmup": 1,
            "thermal": "record",
            "placement": "each",
            "engine_options": {"threads": 1},
            "workloads": [{"kind": "generate", "prompt_tokens": [prompt], "gen_tokens": list(gen)}],
        }
    )


def scenario(
    models_dir: Path,
    log_dir: Path,
    *,
    throttle: float = 0.10,
    processes: int = 8,
    gen: tuple[int, ...] = (128, 256, 512),
    prompt: int = 32,
    repetitions: int = 3,
    timeout_s: float = 300,
) -> dict:
    """One run. Returns healthy and throttled worker names, the flagged hosts, every peer test, and wall time."""
    t0 = time.monotonic()
    tag = uuid.uuid4().hex[:6]
    healthy, throttled = f"peer-{tag}-ok", f"peer-{tag}-slow"
    admin = database.normalize_url(PG_ADMIN)
    conninfo = dict(
        host=admin.host, port=admin.port or 5432, user=admin.username, dbname=admin.database, autocommit=True
    )
    name = f"sb_suspect_{tag}"
    with psycopg.connect(**conninfo) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    url = admin.set(database=name).render_as_string(hide_password=False)
    redis, workers, logins = RedisServer().start(), [], []
    try:
        database.upgrade(url)
        for w, env in (
            (healthy, {}),
            (throttled, {"SILICONBENCH_THROTTLE": repr(throttle), "PYTHONPATH": f"{THROTTLE_DIR}:{ROOT}"}),
        ):
            login = roles.create_login(url, "worker", roles.login_for(w), host=w)
            logins.append(roles.login_for(w))
            db = admin.set(database=name, username=login.url.username, password=login.url.password)
            workers.append(
                WorkerProc(
                    w,
                    broker=redis.url,
                    database=db.render_as_string(hide_password=False),
                    models_dir=models_dir,
                    log_dir=log_dir,
                    env=env,
                )
            )
        for cpu, w in enumerate(workers):
            w.wait_ready(120)
            # Each worker stands for a Mac of its own: a core each (its jobs' processes inherit it), so the two
            # workers' jobs, which run at the same time, do not take turns on one core.
            os.sched_setaffinity(w.pid, {cpu % os.cpu_count()})
        # Round by round (as a campaign interleaves): both workers run round r's jobs at the same time, so the
        # load other programs put on this shared machine falls on both; only the throttle tells them apart.
        sids, progress = [], {}
        for r in range(processes):
            sid, _ = fleet.submit_sweep(
                sweep_spec(gen, prompt, repetitions),
                database_url=url,
                broker_url=redis.url,
                sweep_id=f"suspect-{tag}-r{r}",
            )
            sids.append(sid)
            for host, counts in wait_for(lambda: _done(url, sid), timeout_s, every_s=0.2, what=f"sweep {sid}").items():
                for k, n in counts.items():
                    progress.setdefault(host, {}).setdefault(k, 0)
                    progress[host][k] += n
        with database.session_scope(url) as s:
            skus = {h.name: sku_of(h) for h in s.scalars(select(Host))}
            points = worker_points(s, sids)
        # The same processes as if each had run alone (no rounds to pair): the unpaired test, for comparison.
        alone = [dataclasses.replace(p, sweep_id=p.job_id) for p in points]
        return {
            "healthy": healthy,
            "throttled": throttled,
            "skus": skus,
            "progress": progress,
            "flagged": sorted({t.host for t in suspect_hosts(points, skus, METRIC)}),
            "flagged_unpaired": sorted({t.host for t in suspect_hosts(alone, skus, METRIC)}),
            "tests": peer_tests(points, skus, METRIC),
            "wall_s": time.monotonic() - t0,
        }
    finally:
        for w in workers:
            w.stop()
        redis.stop()
        database.dispose(url)
        with psycopg.connect(**conninfo) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            for login in logins:
                c.execute(f'DROP ROLE IF EXISTS "{login}"')
