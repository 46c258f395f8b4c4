"""`siliconbench regressions bisect`: the llama.cpp commit that caused a regression, with every step's evidence;
`regressions bisections`: every bisection, this machine's and the fleet's, from the one store."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from siliconbench.contract.errors import UserError

from . import compare as _compare
from .common import check_format, console, database, print_json, settings, user_errors

METRIC_HELP = (
    "What is bisected: decode_tps (default; a finding's own metric with --finding) or prefill_tps, as the "
    "build's llama-bench measures them"
)
# Exit statuses of `regressions bisect` (docs/builds-and-bisection.md's table): how the search ended.
EXIT_HELP = (
    "Exit 0: found (the first bad commit, confirmed by a re-measurement); 1: failed; 2: bad input; "
    "3: inconclusive (what would resolve it is said); 4: ambiguous (every commit it may be is listed); "
    "5: equivalent ends (no regression); 6: the bad end is an improvement."
)


def _ratio(c: dict | None) -> str:
    if not c or c.get("ratio") is None:
        return "-"
    lo, hi = c.get("ci_low"), c.get("ci_high")
    ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else ""
    p = f" p={c['p_value']:.3g}" if c.get("p_value") is not None else ""
    return f"{c['ratio']:.3f}{ci}{p}"


def steps_table(rec: dict) -> Table:
    t = Table(title=f"bisection {rec['id']} on {rec['metric']}", title_justify="left")
    for col in ("step", "commit", "build", "subject", "vs last good", "first bad vs it", "procs", "verdict"):
        t.add_column(col)
    for i, s in enumerate(rec["steps"], 1):
        c = s.get("commit") or {}
        t.add_row(
            f"{i} {s['kind']}",
            c.get("sha", "")[:12],
            f"b{c['number']}" if c.get("number") is not None else "",
            (c.get("subject") or "")[:40],
            _ratio(s.get("against_good")),
            _ratio(s.get("against_bad")),
            str(s.get("processes") or ""),
            s["verdict"],
        )
    return t


def _bad_input(finding, sweep, good, bad, resume) -> None:
    if resume is not None:
        if finding is not None or sweep is not None or good or bad:
            raise UserError("--resume", "a resumed bisection has its sweep and ends already: give --resume alone.")
    elif finding is not None:
        if sweep is not None or good or bad:
            raise UserError("--finding", "a finding names the sweep, --good and --bad itself: give it alone.")
    elif sweep is None or not good or not bad:
        raise UserError("SWEEP", "give a sweep with --good and --bad, or --finding ID, or --resume ID.")


@user_errors
def bisect(
    sweep: Path = typer.Argument(
        None, exists=True, dir_okay=False, help="Sweep YAML: one model, level and generate (or --finding)"
    ),
    source: Path = typer.Option(None, "--source", help="A llama.cpp git checkout"),
    good: str = typer.Option(None, "--good", help="A ref without the regression (tag b7123, branch or sha)"),
    bad: str = typer.Option(None, "--bad", help="A later ref with it"),
    finding: int = typer.Option(
        None, "--finding", help="A confirmed llama.cpp regression: its series, its metric and its sides' commits"
    ),
    resume: int = typer.Option(None, "--resume", help="Go on with an interrupted bisection (its id)"),
    metric: str = typer.Option(None, "--metric", "-m", help=METRIC_HELP),
    min_effect: float = typer.Option(0.03, "--min-effect", help="Smallest change that counts, in (0, 0.5): 0.03 = 3%"),
    cmake_flag: list[str] = typer.Option([], "--cmake-flag", help="More -DNAME=VALUE for every build"),
    tools: str = typer.Option("llama-bench", "--tools", help="Tools each build makes (comma-separated)"),
    models_dir: Path = typer.Option(None, "--models-dir", help="Models folder (default: SILICONBENCH_MODELS_DIR)"),
    fmt: str = typer.Option("table", "--format", help="table | json"),
) -> None:
    """Build midpoints between --good and --bad and decide each with the confirm statistics (interleaved fresh
    processes against both ends, sequential looks, the minimum effect); the commit it names is re-measured
    against the last good one before it is named."""
    from siliconbench.contract.spec import load_sweep  # verb-local

    from siliconbench.coordinator.bisection.sweeps import finding_sweep  # verb-local
    from siliconbench.embedded import bisect as bisection  # verb-local

    check_format(fmt)
    bisection.check_min_effect(min_effect)
    _bad_input(finding, sweep, good, bad, resume)
    if resume is None and source is None:
        raise UserError("--source", "give the llama.cpp checkout to build the commits from.")
    s = settings(models_dir=models_dir)
    url = database(s)
    quiet = fmt == "json"
    say = None if quiet else (lambda m: console.print(m, style="dim", highlight=False))
    if resume is not None:
        bisection.resumable(url, resume)
        rec = bisection.drive(url, s.resolved_models_dir, resume, say)
    else:
        through = ""
        if finding is not None:
            spec, good, bad, found_metric, through = finding_sweep(url, finding)
            metric = metric or found_metric
        else:
            spec = load_sweep(sweep)
        bid = bisection.start(
            source,
            good,
            bad,
            spec,
            metric=metric or "decode_tps",
            database_url=url,
            models_dir=s.resolved_models_dir,
            min_effect=min_effect,
            tools=tuple(t.strip() for t in tools.split(",") if t.strip()),
            cmake_flags=cmake_flag,
            finding_id=finding,
            finding_through=through,
        )
        rec = bisection.drive(url, s.resolved_models_dir, bid, say)
    if quiet:
        print_json(rec)
    else:
        console.print(steps_table(rec))
        console.print(outcome_line(rec), highlight=False)
    raise typer.Exit(rec["exit_code"] if rec["exit_code"] is not None else 1)


@user_errors
def bisections(
    runner: str = typer.Option(None, "--runner", help="local | fleet (default: both)"),
    fmt: str = typer.Option("table", "--format", help="table | json"),
) -> None:
    """Every bisection in the store, newest first: id, where it ran, its ends, how it ended (``--resume ID``
    goes on with an unfinished one of this machine)."""
    from siliconbench.coordinator.bisection.record import list_bisections  # verb-local
    from siliconbench.storage.database import session_scope  # verb-local

    check_format(fmt)
    if runner not in (None, "local", "fleet"):
        raise UserError("--runner", f"unknown runner {runner!r}.", ["local", "fleet"])
    url = database(settings())
    with session_scope(url) as s:
        rows = list_bisections(s, runner=runner)
    if fmt == "json":
        print_json(rows)
        return
    t = Table(title="bisections", title_justify="left")
    for col in ("id", "runner", "host", "metric", "good", "bad", "status", "outcome", "started"):
        t.add_column(col)
    for r in rows:
        t.add_row(
            str(r["id"]),
            r["runner"],
            r["host"] or "",
            r["metric"],
            r["good"].get("label", ""),
            r["bad"].get("label", ""),
            r["status"],
            r["outcome"] or "",
            r["started_at"],
        )
    console.print(t)


def outcome_line(rec: dict) -> str:
    """How a bisection (this machine's or the fleet's) ended, in words a person acts on."""
    outcome, reason = rec["outcome"], rec.get("reason") or ""
    notes = "".join(f"\nnote: {n}" for n in rec.get("notes") or [])
    skipped = rec.get("skipped") or []
    aside = "".join(f"\nset aside: {x.get('sha', '')[:12]} {x.get('label') or ''}: {x['reason']}" for x in skipped)
    if outcome == "found":
        f = rec["first_bad"]
        named = f", {f['describe']}" if f.get("describe") else ""
        return (
            f"[bold]first bad commit[/]: {f['sha']} (b{f['number']}{named}) {f['subject']!r}\n"
            f"effect on {rec['metric']}, last good -> first bad (re-measured): {_ratio(rec['effect'])}\n"
            f"effect, good end -> first bad: {_ratio(rec.get('effect_from_good'))}{notes}{aside}"
        )
    if outcome == "ambiguous":
        names = "\n".join(
            f"  {c.get('sha', '')} (b{c.get('number')}) {c.get('subject', '')!r}" for c in rec.get("suspects") or []
        )
        return f"[bold yellow]ambiguous[/]: the first bad commit could be any of:\n{names}\n{reason}{notes}{aside}"
    if outcome in ("equivalent", "improvement"):
        return (
            f"[bold]{outcome}[/]: no regression of {rec['metric']} between {rec['good']['label']} and "
            f"{rec['bad']['label']}: {reason}"
        )
    if outcome == "inconclusive":
        return f"[bold yellow]inconclusive[/]: {reason}; nothing is guessed.{notes}{aside}"
    return f"[bold red]{outcome}[/]: {reason or rec.get('error') or ''}{aside}"


# `siliconbench regressions` lists the findings (compare.py); its subcommands bisect them.
regressions_app = typer.Typer(no_args_is_help=False)
regressions_app.callback(invoke_without_command=True)(_compare.regressions)
regressions_app.command("bisect")(bisect)
regressions_app.command("bisections")(bisections)
