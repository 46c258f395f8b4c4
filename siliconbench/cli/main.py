"""The `siliconbench` console command."""

from __future__ import annotations

import typer

from . import db, fleet, models
from .results import results
from .run import run

app = typer.Typer(
    help="Benchmark llama.cpp (Metal) against MLX on your models, quantizations and prompt lengths.",
    no_args_is_help=True, pretty_exceptions_show_locals=False,
)
app.command()(run)
app.command()(results)
for verb in (fleet.worker, fleet.submit, fleet.status, fleet.cancel, fleet.workers, fleet.reconcile):
    app.command()(verb)
app.add_typer(models.app, name="models")
app.add_typer(db.app, name="db")

if __name__ == "__main__":
    app()
