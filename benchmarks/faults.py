"""A fault campaign: a real sweep through the fleet while its processes are killed and its dependencies cut on a
random (seeded) schedule; afterwards, is every job there exactly once, and is everything still serving?

    python benchmarks/faults.py [--jobs 40] [--worker-kills 20] [--broker-restarts 1] [--db-cut-s 60]
                                [--reconciler-kills 2] [--seed 0] [--window-s AUTO] [--json PATH]

Needs PostgreSQL on 127.0.0.1:5432 and redis-server on the PATH (a fresh database and a private Redis, no
persistence, are used and removed). Two `siliconbench worker` processes (each on its own worker login), the
`siliconbench reconcile --loop` and `siliconbench dashboard` reach PostgreSQL through a TCP proxy that can cut every connection. Faults,
spread over the window: kill -9 of a worker (a new one starts in its place 1 s later), of Redis (restarted
empty 2 s later: its queues are lost), of the reconciler (back 2 s later), and one database cut.

Printed: jobs lost (not final, or final without a result), duplicated (two results, or a sample row twice),
incomplete (ok with samples missing), failed with reasons, processes a killed worker left behind, processes
that died by themselves; then whether the workers (a probe job on each), the reconciler (a lost message
resent) and the dashboard (health endpoint and page) still serve. Exits 1 if any of that went wrong.
"""

from __future__ import annotations

import json
import math
import random
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import psycopg
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from siliconbench.contract.spec import parse_sweep  # noqa: E402

from benchmarks import _fault_checks as checks  # noqa: E402
from benchmarks._fleet import ChildWatch, Slot, dashboard  # noqa: E402
from harness.fault_schedule import schedule  # noqa: E402
from harness.fleet import CliProc, RedisServer, TcpCut, WorkerProc  # noqa: E402
from siliconbench.coordinator.fleet import sweeps as fleet  # noqa: E402
from siliconbench.storage import database, roles  # noqa: E402
from siliconbench.worker.models.make.tiny import make_tiny  # noqa: E402

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
MODEL = "tiny-llama-5m"
LEASE_S = "6"  # a killed worker's job is back within seconds (the same on every process of the fleet)


def sweep_spec(jobs: int):
    prompts = [16 + i for i in range(math.ceil(jobs / 2))]  # x 2 engines
    return parse_sweep(
        {
            "name": "faults",
            "models": [MODEL],
            "engines": ["llama.cpp", "mlx"],
            "hosts": "all",
            "placement": "any",
            "repetitions": checks.REPETITIONS,
            "warmup": 0,
            "delay_s": 1.0,
            "workloads": [{"kind": "generate", "prompt_tokens": prompts, "gen_tokens": [4]}],
        }
    )


class Campaign:
    """The fleet under fault: two worker slots, the reconcile loop and the dashboard, through a private Redis and
    a cuttable proxy in front of PostgreSQL; ``inject`` carries out one fault of the schedule. A supervisor
    thread keeps the slots filled from start to stop (the checks after the sweep need them too)."""

    def __init__(self, url: str, work: Path):
        self.rs, self.cut = RedisServer().start(), TcpCut(database.normalize_url(url).port or 5432)
        self.proxied = (
            database.normalize_url(url).set(host="127.0.0.1", port=self.cut.port).render_as_string(hide_password=False)
        )
        env = {
            "SILICONBENCH_BROKER_URL": self.rs.url,
            "SILICONBENCH_DATABASE_URL": self.proxied,
            "SILICONBENCH_LEASE_S": LEASE_S,
            "SILICONBENCH_MODELS_DIR": str(work / "models"),
            "XDG_DATA_HOME": str(work / "xdg"),
        }

        def worker(n: str):
            # Each on its own worker login (as a fleet's Macs are: row-level security on every write), via the proxy.
            login = roles.create_login(url, "worker", roles.login_for(n), host=n).url
            mine = database.normalize_url(self.proxied).set(username=login.username, password=login.password)
            return lambda: WorkerProc(
                n,
                broker=self.rs.url,
                database=mine.render_as_string(hide_password=False),
                models_dir=work / "models",
                log_dir=work,
                env=env,
            )

        self.workers = [
            Slot(n, worker(n), ready=lambda p: b" ready." in p.log_path.read_bytes()) for n in ("fault-a", "fault-b")
        ]
        self.reconciler = Slot(
            "reconciler", lambda: CliProc("reconciler", ["reconcile", "--loop", "--every", "1"], env, work)
        )
        self.dash, self.dash_url = dashboard(env, work)
        self.watch, self.injected = ChildWatch(), Counter()
        self.lock, self.stopped = threading.Lock(), threading.Event()
        self.supervisor = threading.Thread(target=self._supervise, daemon=True)
        self.supervisor.start()

    def _supervise(self) -> None:
        while not self.stopped.wait(0.2):
            self.tick()

    def tick(self) -> list[int]:
        """Supervise every slot; returns the workers running a job now."""
        with self.lock:
            for s in (*self.workers, self.reconciler):
                s.tick()
            return self.watch.scan([w.proc.pid for w in self.workers if w.proc.alive()])

    def ready(self) -> bool:
        with self.lock:
            return all(w.ready() for w in self.workers)

    def inject(self, what: str, which: int) -> list[tuple[float, str, int]]:
        """Carry out one event; returns the events it schedules (a restart, a retry when nothing was there)."""
        if what == "kill worker":
            slot = self.workers[which]
            with self.lock:
                mid_job = slot.proc.pid in self.watch.scan([slot.proc.pid])
                if slot.kill9(restart_after_s=1.0) is None:  # its process is between a kill and its restart
                    return [(1.0, what, which)]
            self.injected["worker kills mid-job"] += mid_job
        elif what == "kill broker":
            self.rs.kill9()
            return self._count(what, [(2.0, "start broker", 0)])
        elif what == "start broker":
            self.rs.start()  # the same port, empty
        elif what == "kill reconciler":
            with self.lock:
                if self.reconciler.kill9(restart_after_s=2.0) is None:
                    return [(1.0, what, which)]
        elif what == "cut database":
            self.cut.cut()
        elif what == "restore database":
            self.cut.restore()
        return self._count(what, [])

    def _count(self, what: str, then: list) -> list:
        self.injected[what] += what in checks.FAULTS
        return then

    def stop(self) -> None:
        self.stopped.set()
        self.supervisor.join()
        for p in (*self.workers, self.reconciler, self.dash):
            p.stop()
        self.rs.stop()
        self.cut.close()


def run_sweep(c: Campaign, url: str, sweep_id: str, events: list, timeout_s: float, console: Console) -> bool:
    """Inject the faults at their times while the sweep runs; then wait for its end. True if it ended."""
    total = checks.count_jobs(url, sweep_id)
    t0, pending, last_poll, todo = time.monotonic(), total, -1.0, list(events)
    n_faults = sum(what in checks.FAULTS for _, what, _ in events)
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("sweep", total=total)
        while todo or pending:
            now = time.monotonic() - t0
            if now > timeout_s:
                return False
            while todo and todo[0][0] <= now:
                _, what, which = todo.pop(0)
                later = c.inject(what, which)
                todo = sorted(todo + [(now + dt, w, i) for dt, w, i in later])
                postponed = any(w == what for _, w, _ in later)
                if what in checks.FAULTS and not postponed:
                    c.injected["faults while jobs ran"] += pending > 0
                    target = f" {c.workers[which].name}" if what == "kill worker" else ""
                    bar.console.log(f"t+{now:5.1f} s  {what}{target}")
            if now - last_poll >= 1.0:
                (done, pending), last_poll = checks.done_and_pending(url, sweep_id), now
                faults = sum(c.injected[k] for k in checks.FAULTS)
                bar.update(task, completed=done, description=f"sweep, {faults} of {n_faults} faults injected")
            time.sleep(0.2)
    return True


def main(
    jobs: int = 40,
    worker_kills: int = 20,
    broker_restarts: int = 1,
    db_cut_s: float = 60.0,
    reconciler_kills: int = 2,
    seed: int = 0,
    window_s: float = typer.Option(None, help="Default: from the faults"),
    timeout_s: float = 1800.0,
    json_out: Path = typer.Option(None, "--json", help="Also write the figures here"),
    work_dir: Path = typer.Option(
        None, help="Where the models and logs go (default: a new temporary folder, kept and named in the report)"
    ),
) -> None:
    console = Console()
    t_start = time.monotonic()
    window = window_s or 10 + 8 * worker_kills + 25 * broker_restarts + 1.5 * db_cut_s + 8 * reconciler_kills
    events = schedule(
        random.Random(seed),
        worker_kills=worker_kills,
        broker_restarts=broker_restarts,
        db_cut_s=db_cut_s,
        reconciler_kills=reconciler_kills,
        window_s=window,
    )
    name = f"sb_faults_{uuid.uuid4().hex[:8]}"
    work = work_dir or Path(tempfile.mkdtemp(prefix=f"{name}-"))
    work.mkdir(parents=True, exist_ok=True)
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = database.normalize_url(ADMIN).set(database=name).render_as_string(hide_password=False)
    c = None
    try:
        database.upgrade(url)
        make_tiny(work / "models", name=MODEL, hidden_size=256, n_layers=4, n_heads=4, n_kv_heads=2, seed=0)
        c = Campaign(url, work)
        with console.status("starting two workers, the reconcile loop and the dashboard"):
            while not c.ready():
                time.sleep(0.2)
        sweep_id, _ = fleet.submit_sweep(sweep_spec(jobs), database_url=url, broker_url=c.rs.url)
        t0 = time.monotonic()
        finished = run_sweep(c, url, sweep_id, events, timeout_s, console)
        sweep_s = time.monotonic() - t0
        time.sleep(3)  # a job's child notices its worker's death within 0.5 s (siliconbench/worker/job/child_main.py)
        with c.lock:
            left = c.watch.alive_of(set().union(*(w.killed_pids for w in c.workers)))
        for pid, _, _ in left:  # ours to clean up: started under a worker we started and killed
            checks.kill_quietly(pid)
        slots = (*c.workers, c.reconciler)
        figures = {
            **checks.audit(url, sweep_id),
            "seed": seed,
            "window_s": window,
            "sweep_finished": finished,
            "sweep_s": round(sweep_s, 1),
            "db_cut_s": db_cut_s,
            "faults": {k: c.injected[k] for k in (*checks.FAULTS, "worker kills mid-job", "faults while jobs ran")},
            "left_behind": [f"pid {p} (child of killed worker {w}): {cmd}" for p, w, cmd in left],
            "died_by_themselves": [d for s in slots for d in s.died],
            "startup_failures_restarted": sum(s.startup_failures for s in slots),
            "serving": checks.serving(url, c.rs.url, work / "models", c.workers, c.reconciler, c.dash, c.dash_url),
        }
    finally:
        if c is not None:
            c.stop()
        database.dispose(url)
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    figures["total_s"] = round(time.monotonic() - t_start, 1)
    console.print(report(figures, work))
    if json_out:
        json_out.write_text(json.dumps(figures, indent=2))
    raise typer.Exit(0 if checks.passed(figures) else 1)


def report(f: dict, work: Path) -> Table:
    t = Table(
        title=f"fault campaign: {f['jobs']} jobs, seed {f['seed']}, faults over {f['window_s']:.0f} s (logs: {work})",
        title_justify="left",
    )
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_column("", justify="left")
    mark = lambda ok: "[green]ok[/]" if ok else "[bold red]FAIL[/]"  # noqa: E731
    for key, label in (("lost", "jobs lost"), ("duplicated", "jobs duplicated"), ("incomplete", "results incomplete")):
        t.add_row(label, str(len(f[key])), mark(not f[key]) + (f" {', '.join(f[key][:5])}" if f[key] else ""))
    t.add_row("jobs ok / failed", f"{f['ok']} / {len(f['failed'])}", "")
    for reason, n in Counter(f["failed"]).most_common(5):
        t.add_row("", str(n), f"failed: {reason}")
    t.add_row("jobs run more than once", str(f["rerun"]), f"{f['interruptions']} interruptions recorded")
    t.add_row("left behind by killed workers", str(len(f["left_behind"])), mark(not f["left_behind"]))
    t.add_row("processes that died by themselves", str(len(f["died_by_themselves"])), mark(not f["died_by_themselves"]))
    t.add_row("start-up failures, restarted", str(f["startup_failures_restarted"]), "a dependency down as they started")
    for k, n in f["faults"].items():
        t.add_row(f"faults: {k}", str(n), f"({f['db_cut_s']:g} s)" if k == "cut database" and n else "")
    t.add_row("sweep finished", "yes" if f["sweep_finished"] else "no", f"{f['sweep_s']:.0f} s after submit")
    for k, ok in f["serving"].items():
        t.add_row(
            f"serving afterwards: {k}",
            "yes" if ok is True else "no",
            mark(ok is True) + ("" if ok is True else f" {ok}"),
        )
    t.add_row("total time", f"{f['total_s']:.0f} s", "")
    return t


if __name__ == "__main__":
    typer.run(main)
