"""`siliconbench run SWEEP.yaml`: the whole sweep in-process, with progress, then the results table."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from siliconbench.contract.spec import load_sweep
from siliconbench.contract.workloads import notices

from .common import EXIT_FAILED_JOBS, console, database, settings, user_errors


def _recover(url: str, models_dir: Path) -> None:
    """Embedded sweeps of this host whose process stopped before their end: on_interrupt applied first."""
    from siliconbench.embedded.recover import recover  # verb-local
    from siliconbench.embedded.run import run_jobs  # verb-local
    from siliconbench.worker.envs.venvs import interpreters  # verb-local

    for r in recover(url):
        console.print(
            f"[yellow]sweep {r.sweep_id}[/] was interrupted ({r.owner} stopped): "
            f"{len(r.jobs)} unfinished job(s) " + ("run again now" if r.policy == "rerun" else "failed")
        )
        if r.policy == "rerun":
            run_jobs(r.sweep_id, r.jobs, interpreters(r.jobs), database_url=url, models_dir=models_dir)


@user_errors
def run(
    sweep: Path = typer.Argument(..., help="Sweep spec (YAML)"),
    models_dir: Path = typer.Option(None, "--models-dir", help="Models folder (default: SILICONBENCH_MODELS_DIR)"),
    sweep_id: str = typer.Option(None, help="Pin the sweep id (default: name + spec digest + time)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and list the jobs; run nothing"),
) -> None:
    """Run a sweep on this machine (no broker needed) and print its results table."""
    import time  # verb-local

    from siliconbench.coordinator.reports.tables import print_sweep_table  # verb-local
    from siliconbench.embedded.run import plan, run_sweep  # verb-local

    s = settings(models_dir=models_dir)
    spec = load_sweep(sweep)
    sid = sweep_id or f"{spec.name}-{time.strftime('%Y%m%dT%H%M%S')}"
    jobs = plan(spec, s.resolved_models_dir, sweep_id=sid)
    for text in notices(jobs):
        console.print(f"[yellow]note:[/] {text}")
    if dry_run:
        for j in jobs:
            console.print(f"{j.index:>4}  {j.job_id}  {j.label()}")
        console.print(f"{len(jobs)} jobs")
        return
    url = database(s)
    _recover(url, s.resolved_models_dir)
    reps = sum(j.warmup + j.repetitions for j in jobs)
    failures = 0
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as bar:
        task = bar.add_task(f"{spec.name}: {len(jobs)} jobs", total=reps)
        done_reps: dict[str, int] = {}

        def on_event(job, event):
            if event.get("event") == "repetition":
                done_reps[job.job_id] = done_reps.get(job.job_id, 0) + 1
                bar.advance(task)
            elif event.get("event") == "loaded":
                bar.update(task, description=f"{job.label()} (loaded in {event['load_s']:.2f} s)")
            elif event.get("event") == "sending":  # a serve run: minutes at a low rate
                bar.update(task, description=f"{job.label()}: run {event['index']}, {event['requests']} requests")

        def on_done(job, result):
            nonlocal failures
            # A failed job never reported its repetitions: move the bar past them.
            bar.advance(task, job.warmup + job.repetitions - done_reps.get(job.job_id, 0))
            if result.status != "ok":
                failures += 1
                console.print(f"[red]failed[/] {job.label()}: {result.error}")

        run_sweep(spec, jobs, database_url=url, models_dir=s.resolved_models_dir, on_event=on_event, on_done=on_done)
    print_sweep_table(url, sid, console=console)
    if failures:
        raise typer.Exit(EXIT_FAILED_JOBS)
