"""The `siliconbench` console command."""

from __future__ import annotations

import typer

from . import db, models
from .results import results
from .run import run

app = typer.Typer(
    help="Benchmark llama.cpp (Metal) against MLX on your models, quantizations and prompt lengths.",
    no_args_is_help=True, pretty_exceptions_show_locals=False,
)
app.command()(run)
app.command()(results)
app.add_typer(models.app, name="models")
app.add_typer(db.app, name="db")

if __name__ == "__main__":
    app()
