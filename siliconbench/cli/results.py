"""`siliconbench results`: print or export stored results (table, csv, json)."""

from __future__ import annotations

import csv
import subprocess
import sys
from enum import StrEnum
from pathlib import Path

import typer

from siliconbench.contract.errors import UserError

from siliconbench.storage.database import session_scope

from .common import console, database, print_json, settings, user_errors


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


@user_errors
def results(
    sweep: str = typer.Option(None, "--sweep", help="Sweep id (default: the latest sweep)"),
    all_sweeps: bool = typer.Option(False, "--all", help="Every stored result, not only one sweep"),
    fmt: Format = typer.Option(Format.table, "--format", help="table | csv | json"),
    plot: Path = typer.Option(
        None,
        "--plot",
        help="Also write the quantization matrix's frontier plots (quality and speed against size) to this HTML file",
    ),
) -> None:
    """Print the results of a sweep; JSON carries every raw sample and the environment."""
    from siliconbench.coordinator.reports.export import load_records, to_csv_rows  # verb-local
    from siliconbench.coordinator.reports.tables import print_sweep_table  # verb-local
    from siliconbench.storage import sweep_store  # verb-local

    url = database(settings())
    if fmt is Format.table and not all_sweeps:
        print_sweep_table(url, sweep, console=console)
        if plot is not None:
            write_plot(sweep, plot)
        return
    with session_scope(url) as s:
        sweep_id = None if all_sweeps else (sweep or sweep_store.latest_sweep_id(s))
        records = load_records(s, sweep_id=sweep_id) if (sweep_id or all_sweeps) else []
    if fmt is Format.json:
        print_json(records)
    elif fmt is Format.csv:
        rows = to_csv_rows(records)
        if rows:
            w = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    else:
        from siliconbench.coordinator.reports.tables import results_table  # verb-local

        console.print(results_table(records, title="all results"))


def write_plot(sweep: str | None, path: Path) -> None:
    """The frontier charts as an HTML page, drawn by the dashboard's side (the CLI imports no plotting library)."""
    cmd = [sys.executable, "-m", "siliconbench.dashboard.quant_plot", str(path)] + (["--sweep", sweep] if sweep else [])
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise UserError("--plot", (run.stderr.strip().splitlines() or ["the plot could not be drawn"])[-1])
    console.print(f"frontier plots written to {path}")
