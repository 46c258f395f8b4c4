"""`siliconbench env ...`: engine environments, several versions of an engine side by side on this host."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.table import Table

from .common import console, user_errors

app = typer.Typer(
    help="Engine environments: one virtual environment per engine version (sweeps name them in `engine_versions:`).",
    no_args_is_help=True,
)


@app.command("add")
@user_errors
def add_cmd(
    requirement: str = typer.Argument(..., help="An exact pin: mlx-lm==0.31.3 or llama-cpp-python==0.3.36"),
    with_: list[str] = typer.Option([], "--with", help="Pin more packages into it, e.g. --with 'mlx[cpu]==0.31.2'"),
    name: str = typer.Option(None, "--name", help="Environment name (default: <package>-<version>)"),
    find_links: Path = typer.Option(None, "--find-links", help="Wheel folder (default: SILICONBENCH_WHEEL_CACHE)"),
    allow_build: bool = typer.Option(
        False,
        "--allow-build",
        help="Let pip build llama-cpp-python from source (6-9 minutes on 2 cores) when no prebuilt wheel exists",
    ),
) -> None:
    """Create a virtual environment holding one engine version, and record it."""
    from worker.envs import venvs as envs  # verb-local

    env = envs.add(
        requirement,
        extra=with_,
        name=name,
        find_links=find_links,
        allow_build=allow_build,
        progress=lambda msg: console.print(f"  {msg}", style="dim", highlight=False),
    )
    console.print(f"[green]ready[/] {env.name}: {env.python}", highlight=False)


@app.command("list")
@user_errors
def list_cmd(fmt: str = typer.Option("table", "--format", help="table | json")) -> None:
    """This host's engine versions: its own interpreter's, then each environment's."""
    from worker.envs import venvs as envs  # verb-local

    rows = []
    for engine in envs.ENGINE_PACKAGE:
        own = envs.own_version(engine)
        if own:
            rows.append(
                dict(
                    name="(own)",
                    engine=engine,
                    package=envs.ENGINE_PACKAGE[engine],
                    version=own,
                    packages={},
                    python=sys.executable,
                    ok=True,
                    created_at="",
                )
            )
    for e in envs.list_envs():
        rows.append(
            dict(
                name=e.name,
                engine=e.engine,
                package=e.package,
                version=e.version,
                packages=e.packages,
                python=e.python,
                ok=e.ok(),
                created_at=e.created_at,
            )
        )
    if fmt == "json":
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    t = Table(title=f"engine environments in {envs.envs_root()}", title_justify="left")
    for c in ("name", "engine", "version", "with", "python", "created"):
        t.add_column(c)
    for r in rows:
        others = ", ".join(f"{k} {v}" for k, v in r["packages"].items() if k != r["package"])
        t.add_row(
            r["name"], r["engine"], r["version"], others, r["python"] if r["ok"] else "[red]missing[/]", r["created_at"]
        )
    console.print(t)


@app.command("remove")
@user_errors
def remove_cmd(name: str = typer.Argument(..., help="Environment name, or its requirement (mlx-lm==0.31.3)")) -> None:
    """Delete an engine environment and its record."""
    from worker.envs import venvs as envs  # verb-local

    env = envs.remove(name)
    console.print(f"removed {env.name} ({env.path})", highlight=False)
