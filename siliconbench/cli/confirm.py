"""`siliconbench confirm FINDING`: rerun a finding's two versions interleaved A/B/A/B, here or on fleet workers, and
attach the verdict to it."""

from __future__ import annotations

from pathlib import Path

import typer

from siliconbench.contract.spec import COMPARE_PROCESSES

from siliconbench.storage.database import session_scope

from .common import console, database, fleet_settings, settings, user_errors


@user_errors
def confirm(
    finding: int = typer.Argument(..., help="Finding id (from `siliconbench regressions`)"),
    rounds: int = typer.Option(COMPARE_PROCESSES, "--rounds", help="A/B rounds, interleaved: processes a side"),
    repetitions: int = typer.Option(None, "--repetitions", help="Per job (default: the series' own)"),
    models_dir: Path = typer.Option(None, "--models-dir", help="Models folder (default: SILICONBENCH_MODELS_DIR)"),
    host: list[str] = typer.Option([], "--host", help="Through the fleet: run it on this worker (repeatable)"),
    sku: str = typer.Option(
        None,
        "--sku",
        help="Through the fleet: on every online worker of this SKU "
        "(chip · CPU cores · GPU cores · memory · OS major; `siliconbench workers` lists them)",
    ),
    wait: bool = typer.Option(True, "--wait/--no-wait", help="Fleet: wait for the jobs and attach the result"),
) -> None:
    """Rerun a finding's baseline and candidate interleaved A/B/A/B on this host, or on fleet workers (--host /
    --sku); attach the verdict to it."""
    if host or sku:
        return _confirm_on_fleet(finding, rounds, repetitions, host, sku, wait)
    from siliconbench.embedded.confirm import run_confirm  # verb-local

    s = settings(models_dir=models_dir)
    url = database(s)
    done = []
    f = run_confirm(
        url,
        finding,
        s.resolved_models_dir,
        rounds=rounds,
        repetitions=repetitions,
        on_done=lambda job, res: (
            done.append(res.status)
            or console.print(
                f"  {job.index + 1:>2}. {job.engine} {job.engine_version}: {res.status}", style="dim", highlight=False
            )
        ),
    )
    _print_confirmation(f)


def _print_confirmation(f: dict) -> None:
    """One line per host: the finding's status (with several hosts, each host's verdict first) and the numbers."""
    r = f["confirm_result"]
    nan = float("nan")
    per_host = r["hosts"].items() if "hosts" in r else [(r.get("host"), r)]
    for name, one in per_host:
        on = f" on {name}" if name else ""
        console.print(
            f"finding {f['id']} ({f['series']}, {f['metric']}){on}: [bold]{f['status']}[/] — "
            f"{one['baseline']} → {one['candidate']}: ratio {one['ratio'] or nan:.3f} "
            f"(95% CI {one['ci_low'] or nan:.3f}–{one['ci_high'] or nan:.3f}), "
            f"p {one['p_value'] if one['p_value'] is not None else nan:.2g}, {one['verdict']}; "
            f"sweep {one['sweep_id']}{_left_out(one)}",
            highlight=False,
        )


def _left_out(one: dict) -> str:
    """What the comparison lacks: jobs that failed, and jobs left out as disturbed (throttled, contended)."""
    said = [
        f"{n} job(s) {what}"
        for n, what in ((one.get("failed_jobs", 0), "failed"), (one.get("disturbed_jobs", 0), "left out as disturbed"))
        if n
    ]
    return f"; {', '.join(said)}" if said else ""


def _confirm_on_fleet(
    finding: int, rounds: int, repetitions: int | None, hosts: list[str], sku: str | None, wait: bool
) -> None:
    from siliconbench.coordinator.confirm.on_fleet import (  # verb-local
        attach_confirm,
        choose_hosts,
        submit_confirm,
        wait_confirm,
    )

    s, broker = fleet_settings()  # checked as every fleet verb does
    with session_scope(s.database_url) as ses:
        chosen = choose_hosts(ses, hosts, sku)
    sweep_id = submit_confirm(s.database_url, broker, finding, chosen, rounds=rounds, repetitions=repetitions)
    console.print(f"confirmation sweep {sweep_id}: {2 * rounds} job(s) on each of {', '.join(chosen)}", highlight=False)
    if not wait:
        console.print(f"finding {finding} is confirming; `siliconbench status {sweep_id}` follows it.", highlight=False)
        return

    def progress(counts: dict[str, int]) -> None:
        total, final = sum(counts.values()), sum(counts.get(k, 0) for k in ("ok", "failed", "cancelled"))
        console.print(
            f"  {final}/{total} done ({counts.get('running', 0)} running, {counts.get('failed', 0)} failed)",
            style="dim",
            highlight=False,
        )

    wait_confirm(s.database_url, sweep_id, broker_url=broker, on_progress=progress)
    _print_confirmation(attach_confirm(s.database_url, finding, sweep_id))
