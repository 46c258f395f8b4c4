"""`siliconbench watch ...`: a watch, declared once — which engine packages (or llama.cpp's tags) to follow, the
suite a new release runs, on which hosts, how often to look (`add`, `list`, `remove`), one look at the index now
(`run-now`), and the bisections a confirmed llama.cpp regression started (`bisections`).

Watches live in the shared database (SILICONBENCH_DATABASE_URL or --database): the scheduler that runs their
checks and the workers that run their campaigns read them there. An explicit SQLite URL works too.
Exit status: 0 done, 2 bad input (nothing written), 1 `run-now` could not read the index (the check is
recorded with its error).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from siliconbench.contract.errors import UserError
from siliconbench.contract.watch_spec import load_watch

from siliconbench.storage.database import ready, session_scope

from .common import EXIT_FAILED_JOBS, check_format, console, print_json, settings, user_errors

app = typer.Typer(
    help="Watches: benchmark each new release of an engine package across the fleet by itself.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
_DATABASE = typer.Option(None, "--database", help="Database URL (default: SILICONBENCH_DATABASE_URL)")


def _database(database: str | None) -> str:
    s = settings(database_url=database)
    if not s.database_url:
        raise UserError(
            "SILICONBENCH_DATABASE_URL",
            "watches live in the shared database: set it or pass --database postgresql://USER@HOST/siliconbench.",
        )
    ready(s.database_url)
    return s.database_url


@app.command("add")
@user_errors
def add_cmd(
    file: Path = typer.Argument(..., help="Watch spec (YAML): name, packages, suite, hosts, every, notify, index"),
    replace: bool = typer.Option(
        False,
        "--replace",
        help="Replace a watch of that name whose spec differs (its versions seen and campaigns are kept)",
    ),
    database: str = _DATABASE,
) -> None:
    """Validate a watch and store it; the scheduler looks at its index every `every:`."""
    from siliconbench.coordinator.watch import watches  # verb-local

    spec = load_watch(file)  # before the database: bad input is refused without touching it
    url = _database(database)
    with session_scope(url) as s:
        outcome = watches.add(s, spec, replace=replace)
        index = watches.resolved_index(spec)
    console.print(
        f"{outcome} watch [bold]{escape(spec.name)}[/]: follows {', '.join(spec.packages)} on "
        f"{escape(index)}, every {spec.every}",
        highlight=False,
    )


@app.command("list")
@user_errors
def list_cmd(fmt: str = typer.Option("table", "--format", help="table | json"), database: str = _DATABASE) -> None:
    """Every watch: packages, how often, hosts, when it last looked, campaigns made."""
    from siliconbench.coordinator.watch import watches  # verb-local

    check_format(fmt)
    with session_scope(_database(database)) as s:
        rows = watches.list_watches(s)
    if fmt == "json":
        print_json(rows)
        return
    t = Table(title=f"{len(rows)} watch(es)", title_justify="left")
    for c in ("name", "packages", "every", "hosts", "index", "last checked", "campaigns"):
        t.add_column(c, justify="right" if c == "campaigns" else "left")
    for r in rows:
        t.add_row(
            r["name"],
            ", ".join(r["packages"]),
            r["every"],
            escape(json.dumps(r["hosts"])),
            escape(r["index"]),
            r["last_checked_at"].strftime("%Y-%m-%d %H:%M:%S") if r["last_checked_at"] else "never",
            str(r["campaigns"]),
        )
    console.print(t)


@app.command("remove")
@user_errors
def remove_cmd(name: str = typer.Argument(..., help="Watch name"), database: str = _DATABASE) -> None:
    """Delete a watch with its checks, versions seen and campaigns."""
    from siliconbench.coordinator.watch import watches  # verb-local

    with session_scope(_database(database)) as s:
        watches.remove(s, name)
    console.print(f"removed watch [bold]{escape(name)}[/]", highlight=False)


@app.command("run-now")
@user_errors
def run_now_cmd(name: str = typer.Argument(..., help="Watch name"), database: str = _DATABASE) -> None:
    """Look at the index now, as the scheduler would: record the versions, make a campaign of a new release."""
    from siliconbench.coordinator.watch import watches  # verb-local

    check = watches.run_check(_database(database), name)
    for package, versions in check["versions"].items():
        console.print(f"{package}: {', '.join(versions) or 'no release'}", highlight=False)
    for c in check["campaigns"]:
        what = (
            f"{c['package']} {c['baseline']} → {c['candidate']} on {', '.join(c['hosts']) or 'no host'} "
            f"({c['status']}{': ' + c['error'] if c['error'] else ''})"
        )
        console.print(f"[green]new campaign[/] {c['id']}: {escape(what)}", highlight=False, soft_wrap=True)
    if not check["new_campaigns"]:
        console.print("no new campaign", style="dim")
    if check["error"]:
        console.print(f"[bold red]error[/]: {escape(check['error'])}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_FAILED_JOBS)


@app.command("bisections")
@user_errors
def bisections_cmd(
    watch: str = typer.Option(None, "--watch", help="Only this watch's"),
    fmt: str = typer.Option("table", "--format", help="table | json"),
    database: str = _DATABASE,
) -> None:
    """The fleet's bisections: a regression a watch confirmed between two llama.cpp tags, searched to its commit
    on the host that confirmed it, with every step's evidence."""
    from siliconbench.coordinator.watch.bisections import list_bisections  # verb-local

    from .bisect import outcome_line, steps_table  # verb-local

    check_format(fmt)
    with session_scope(_database(database)) as s:
        rows = list_bisections(s, watch, runner="fleet")
    if fmt == "json":
        print_json(rows)
        return
    if not rows:
        console.print(
            "no bisection yet: one starts when a watch on llama.cpp's tags confirms a regression", style="dim"
        )
    for r in rows:
        console.print(
            f"[bold]{r['id']}[/] on {escape(r['host'])} (campaign {r['campaign_id']}, finding {r['finding_id']}): "
            f"{r['good']['label']} → {r['bad']['label']}, {r['commits']} commits, {r['status']}"
            + (f": {escape(r['error'])}" if r["error"] else ""),
            highlight=False,
        )
        console.print(steps_table(r))
        if r["status"] == "done":
            console.print(outcome_line(r), highlight=False)
