"""`siliconbench env ...`: engine environments, several versions of an engine side by side on this host."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.table import Table

from siliconbench.contract.errors import UserError

from .common import console, user_errors

app = typer.Typer(
    help="Engine environments: one virtual environment per engine version (sweeps name them in `engine_versions:`).",
    no_args_is_help=True,
)


@app.command("add")
@user_errors
def add_cmd(
    requirement: str = typer.Argument(
        ..., help="An exact pin: mlx-lm==0.31.3 or llama-cpp-python==0.3.36; or llama.cpp with --source"
    ),
    source: Path = typer.Option(
        None, "--source", help="llama.cpp: a git checkout (or any source tree) to build a commit of"
    ),
    ref: str = typer.Option(None, "--ref", help="llama.cpp: the tag (b7123), branch or commit to build (default HEAD)"),
    prebuilt: Path = typer.Option(
        None, "--prebuilt", help="llama.cpp: a release archive (llama-bNNNN-bin-*.zip) or an installed prefix"
    ),
    cmake_flag: list[str] = typer.Option([], "--cmake-flag", help="llama.cpp: more -DNAME=VALUE for cmake"),
    tools: str = typer.Option(
        "llama-bench,llama-server,llama-perplexity", "--tools", help="llama.cpp: the tools to build (comma-separated)"
    ),
    with_: list[str] = typer.Option([], "--with", help="Pin more packages into it, e.g. --with 'mlx[cpu]==0.31.2'"),
    name: str = typer.Option(None, "--name", help="Environment name (default: <package>-<version>)"),
    find_links: Path = typer.Option(None, "--find-links", help="Wheel folder (default: SILICONBENCH_WHEEL_CACHE)"),
    allow_build: bool = typer.Option(
        False,
        "--allow-build",
        help="Let pip build llama-cpp-python from source (6-9 minutes on 2 cores) when no prebuilt wheel exists",
    ),
) -> None:
    """Create a virtual environment holding one engine version (or build a llama.cpp commit), and record it."""
    from siliconbench.worker.envs import venvs as envs  # verb-local

    say = lambda msg: console.print(f"  {msg}", style="dim", highlight=False)  # noqa: E731
    if requirement == "llama.cpp" or source is not None or prebuilt is not None:
        if requirement != "llama.cpp":
            raise UserError("REQUIREMENT", "--source and --prebuilt are llama.cpp's: write `env add llama.cpp ...`.")
        if (source is None) == (prebuilt is None):
            raise UserError("--source", "llama.cpp comes from --source DIR (and --ref REF) or --prebuilt PATH: one.")
        from siliconbench.worker.envs.builds import add_build, add_prebuilt_env  # verb-local

        if prebuilt is not None:
            env = add_prebuilt_env(prebuilt, name=name, progress=say)
        else:
            wanted = tuple(t.strip() for t in tools.split(",") if t.strip())
            env = add_build(source, ref, name=name, cmake_flags=cmake_flag, tools=wanted, progress=say)
        console.print(f"[green]ready[/] {env.name}: {describe_build_row(env.build)}", highlight=False)
        return
    if ref is not None or cmake_flag:
        raise UserError("--ref", "--ref and --cmake-flag belong to `env add llama.cpp --source DIR`.")
    env = envs.add(
        requirement,
        extra=with_,
        name=name,
        find_links=find_links,
        allow_build=allow_build,
        progress=say,
    )
    console.print(f"[green]ready[/] {env.name}: {env.python}", highlight=False)


@app.command("list")
@user_errors
def list_cmd(fmt: str = typer.Option("table", "--format", help="table | json")) -> None:
    """This host's engine versions: its own interpreter's, then each environment's."""
    from siliconbench.worker.envs import venvs as envs  # verb-local

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
                build=e.build or None,
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
        if r.get("build"):
            others = describe_build_row(r["build"])
        t.add_row(
            r["name"], r["engine"], r["version"], others, r["python"] if r["ok"] else "[red]missing[/]", r["created_at"]
        )
    console.print(t)


@app.command("remove")
@user_errors
def remove_cmd(name: str = typer.Argument(..., help="Environment name, or its requirement (mlx-lm==0.31.3)")) -> None:
    """Delete an engine environment and its record."""
    from siliconbench.worker.envs import venvs as envs  # verb-local

    env = envs.remove(name)
    console.print(f"removed {env.name} ({env.path})", highlight=False)


def describe_build_row(build: dict) -> str:
    rev, compat = build.get("revision", {}), build.get("compatibility", {})
    path = f"binding {compat.get('binding')}" if compat.get("compatible") else "its llama-bench"
    return f"commit {rev.get('sha', '')[:12]} ({rev.get('describe', '')}), {build.get('backend')}, through {path}"
