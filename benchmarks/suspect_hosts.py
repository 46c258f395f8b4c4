"""Does suspect-host detection catch a throttled worker, and leave the healthy one alone? Real processes.

Each run starts a fresh PostgreSQL database, a private Redis and two real `siliconbench worker` processes on
this machine, each on its own worker login: one healthy, one slowed by a real busy-wait inside the engine's
timed calls (benchmarks/_throttle/sitecustomize.py, SILICONBENCH_THROTTLE). Both register the same facts, so
the same SKU. A sweep with ``placement: each`` runs the same llama.cpp jobs (the tiny model, several fresh
processes a configuration) on both, one sweep a round, so each round's processes ran side by side and the
test pairs them (``coordinator.peer_tests``: Wilcoxon signed-rank on the rounds' ratios);
``coordinator.peers.suspect_hosts`` then judges each against the other.
Printed: per run each worker's ratio vs its peer per series, who was flagged; at the end the detection rate
(throttled flagged / runs) and the false-flag rate (healthy flagged / runs), with 95% Wilson intervals.

    .venv/bin/python -m benchmarks.suspect_hosts --runs 10
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
import typer
from rich.console import Console
from sqlalchemy import select

from coordinator import fleet
from coordinator.peers import sku_of, suspect_hosts, worker_points
from coordinator.peer_tests import peer_tests
from siliconbench.spec import parse_sweep
from storage import database, roles
from storage.tables import Host
from tests.fleet_harness import ROOT, RedisServer, WorkerProc, wait_for

MODEL = "tiny-llama-5m"
THROTTLE_DIR = ROOT / "benchmarks" / "_throttle"
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
METRIC = "decode_tps"


def models_folder(given: Path | None) -> Path:
    if given and (given / MODEL / "manifest.json").exists():
        return given
    from worker.models.tiny import make_tiny  # only when no models folder was given: writes the model once

    d = Path(tempfile.mkdtemp(prefix="sb-suspect-models-"))
    make_tiny(d, name=MODEL, hidden_size=256, n_layers=4, n_heads=4, n_kv_heads=2, seed=0)
    return d


def _done(url: str, sweep_id: str) -> dict | None:
    with database.session_scope(url) as s:
        prog = fleet.progress(s, sweep_id)
    return None if sum(c.get("queued", 0) + c.get("running", 0) for c in prog.values()) else prog


def sweep_spec(gen: tuple[int, ...], prompt: int, repetitions: int):
    # threads 1: the two workers share this machine's cores; each job keeps to one, so neither slows the other
    return parse_sweep({"name": "suspect-hosts", "models": [MODEL], "engines": ["llama.cpp"], "processes": 1,
                        "repetitions": repetitions, "warmup": 1, "thermal": "record", "placement": "each",
                        "engine_options": {"threads": 1},
                        "workloads": [{"kind": "generate", "prompt_tokens": [prompt], "gen_tokens": list(gen)}]})


def scenario(models_dir: Path, log_dir: Path, *, throttle: float = 0.10, processes: int = 8,
             gen: tuple[int, ...] = (128, 256, 512), prompt: int = 32, repetitions: int = 3, timeout_s: float = 300) -> dict:
    """One run. Returns healthy and throttled worker names, the flagged hosts, every peer test, and wall time."""
    t0 = time.monotonic()
    tag = uuid.uuid4().hex[:6]
    healthy, throttled = f"peer-{tag}-ok", f"peer-{tag}-slow"
    admin = database.normalize_url(PG_ADMIN)
    conninfo = dict(host=admin.host, port=admin.port or 5432, user=admin.username, dbname=admin.database,
                    autocommit=True)
    name = f"sb_suspect_{tag}"
    with psycopg.connect(**conninfo) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    url = admin.set(database=name).render_as_string(hide_password=False)
    redis, workers, logins = RedisServer().start(), [], []
    try:
        database.upgrade(url)
        for w, env in ((healthy, {}), (throttled, {"SILICONBENCH_THROTTLE": repr(throttle),
                                                   "PYTHONPATH": f"{THROTTLE_DIR}:{ROOT}"})):
            login = roles.create_login(url, "worker", roles.login_for(w), host=w)
            logins.append(roles.login_for(w))
            db = admin.set(database=name, username=login.url.username, password=login.url.password)
            workers.append(WorkerProc(w, broker=redis.url, database=db.render_as_string(hide_password=False),
                                      models_dir=models_dir, log_dir=log_dir, env=env))
        for cpu, w in enumerate(workers):
            w.wait_ready(120)
            # Each worker stands for a Mac of its own: a core each (its jobs' processes inherit it), so the two
            # workers' jobs, which run at the same time, do not take turns on one core.
            os.sched_setaffinity(w.pid, {cpu % os.cpu_count()})
        # Round by round (as a campaign interleaves): both workers run round r's jobs at the same time, so the
        # load other programs put on this shared machine falls on both; only the throttle tells them apart.
        sids, progress = [], {}
        for r in range(processes):
            sid, _ = fleet.submit_sweep(sweep_spec(gen, prompt, repetitions), database_url=url, broker_url=redis.url,
                                        sweep_id=f"suspect-{tag}-r{r}")
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
        return {"healthy": healthy, "throttled": throttled, "skus": skus, "progress": progress,
                "flagged": sorted({t.host for t in suspect_hosts(points, skus, METRIC)}),
                "flagged_unpaired": sorted({t.host for t in suspect_hosts(alone, skus, METRIC)}),
                "tests": peer_tests(points, skus, METRIC), "wall_s": time.monotonic() - t0}
    finally:
        for w in workers:
            w.stop()
        redis.stop()
        database.dispose(url)
        with psycopg.connect(**conninfo) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            for login in logins:
                c.execute(f'DROP ROLE IF EXISTS "{login}"')


def _lengths(label: str) -> str:
    m = re.search(r"tg\d+(?: @ d\d+)?", label)
    return m.group(0) if m else label


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if not n:
        return 0.0, 1.0
    p, d = k / n, 1 + z * z / n
    mid, half = (p + z * z / (2 * n)) / d, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, mid - half), min(1.0, mid + half)


def main(runs: int = typer.Option(5, help="Scenarios to run"),
         throttle: float = typer.Option(0.10, help="The slow worker's timed calls take (1 + this) x as long"),
         processes: int = typer.Option(8, help="Rounds: fresh processes per configuration on each worker"),
         gen: str = typer.Option("128,256,512", help="Generated tokens: one decode series each"),
         repetitions: int = typer.Option(3, help="Measured repetitions inside each process"),
         models_dir: Path | None = typer.Option(None, help="A folder holding tiny-llama-5m (else made)")) -> None:
    console = Console()
    mdir = models_folder(models_dir)
    log_dir = Path(tempfile.mkdtemp(prefix="sb-suspect-logs-"))
    caught = false = caught_unpaired = false_unpaired = 0
    t0 = time.monotonic()
    for i in range(1, runs + 1):
        r = scenario(mdir, log_dir, throttle=throttle, processes=processes, repetitions=repetitions,
                     gen=tuple(int(g) for g in gen.split(",")))
        caught += r["throttled"] in r["flagged"]
        false += r["healthy"] in r["flagged"]
        caught_unpaired += r["throttled"] in r["flagged_unpaired"]
        false_unpaired += r["healthy"] in r["flagged_unpaired"]
        cells = [f"{'slow' if t.host == r['throttled'] else 'ok'} {_lengths(t.series)} {t.ratio:.3f} p {t.p_value:.2g}"
                 for t in sorted(r["tests"], key=lambda t: (t.host, t.series))]
        console.print(f"run {i}/{runs} ({r['wall_s']:.0f} s): flagged {r['flagged'] or 'none'} (unpaired: "
                      f"{r['flagged_unpaired'] or 'none'}); " + "; ".join(cells))
    lo, hi = wilson(caught, runs)
    flo, fhi = wilson(false, runs)
    console.print(f"\n{runs} runs in {time.monotonic() - t0:.0f} s, throttle {throttle:g} ({1 - 1 / (1 + throttle):.1%} "
                  f"slower), {processes} processes a configuration a worker, metric {METRIC}, logs {log_dir}")
    console.print(f"detection: {caught}/{runs} = {caught / runs:.0%} (95% {lo:.0%}–{hi:.0%}); "
                  f"false flags: {false}/{runs} = {false / runs:.0%} (95% {flo:.0%}–{fhi:.0%})")
    ulo, uhi = wilson(caught_unpaired, runs)
    console.print(f"the same processes unpaired (Mann-Whitney, as if no rounds): detection {caught_unpaired}/{runs} "
                  f"= {caught_unpaired / runs:.0%} (95% {ulo:.0%}–{uhi:.0%}); false flags {false_unpaired}/{runs}")


if __name__ == "__main__":
    typer.run(main)
