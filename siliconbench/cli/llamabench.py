"""`siliconbench import-llama-bench FILE` and `siliconbench export`: llama-bench's output into the store, and ours out
in its JSON shape (siliconbench/coordinator/reports/llamabench)."""

from __future__ import annotations

from pathlib import Path

import typer

from siliconbench.contract.errors import UserError

from siliconbench.storage.database import session_scope

from .common import console, database, emit, settings, user_errors


@user_errors
def import_llama_bench(
    file: Path = typer.Argument(..., help="llama-bench output: -o json, jsonl, csv or sql"),
    host: str = typer.Option(None, "--host", help="Machine it ran on (default: this one)"),
    model: str = typer.Option(None, "--model", help="Model of the models folder the file's GGUF is"),
    models_dir: Path = typer.Option(None, "--models-dir", help="Models folder (default: SILICONBENCH_MODELS_DIR)"),
) -> None:
    """Import llama-bench results so existing llama.cpp history joins siliconbench's series."""
    import platform  # verb-local

    from siliconbench.coordinator.reports.llamabench import import_file  # verb-local

    s = settings(models_dir=models_dir)
    url = database(s)
    host = host or platform.node()
    out = import_file(url, file, host=host, models_dir=s.resolved_models_dir, model=model)
    console.print(
        f"imported {out['imported']} tests ({out['raw_samples']} with raw samples) as sweep "
        f"{out['sweep_id']}, host {host}",
        highlight=False,
    )
    for why in out["skipped"]:
        console.print(f"  skipped {why}", style="yellow", highlight=False)


@user_errors
def export(
    fmt: str = typer.Option("llama-bench", "--format", help="llama-bench (JSON array) | llama-bench-jsonl"),
    sweep: str = typer.Option(None, "--sweep", help="Sweep id (default: every stored result)"),
    engine: list[str] = typer.Option(["llama.cpp"], "--engine", help="Engines to export (repeatable: llama.cpp, mlx)"),
    out: Path = typer.Option(None, "--out", help="Write to this file instead of stdout"),
) -> None:
    """Export stored results in llama-bench's JSON shape (one pp and one tg test per result)."""
    from siliconbench.coordinator.reports.llamabench import dumps, export_records  # verb-local
    from siliconbench.storage.result_store import load_results  # verb-local

    if fmt not in ("llama-bench", "llama-bench-jsonl"):
        raise UserError("--format", f"unknown format {fmt!r}.", ["llama-bench", "llama-bench-jsonl"])
    url = database(settings())
    with session_scope(url) as s:
        records = export_records(load_results(s, sweep_id=sweep), engines=tuple(engine))
    emit(dumps(records, fmt), out)
