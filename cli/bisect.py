"""`siliconbench regressions bisect`: the llama.cpp commit that caused a regression, with every step's evidence."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from siliconbench.errors import UserError

from .common import console, database, print_json, settings, user_errors

METRIC_HELP = (
    "What is bisected: decode_tps (default; a finding's own metric with --finding) or prefill_tps, as the "
    "build's llama-bench measures them"
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
    for col in ("step", "commit", "build", "subject", "vs good end", "bad end vs it", "procs", "verdict"):
        t.add_column(col)
    for i, s in enumerate(rec["steps"], 1):
        c = s["commit"]
        t.add_row(
            str(i) if s["kind"] == "midpoint" else "ends",
            c.get("sha", "")[:12],
            f"b{c['number']}" if c.get("number") is not None else "",
            (c.get("subject") or "")[:40],
            _ratio(s.get("against_good")),
            _ratio(s.get("against_bad")),
            str(s.get("processes") or ""),
            s["verdict"],
        )
    return t


@user_errors
def bisect(
    sweep: Path = typer.Argument(
        None, exists=True, dir_okay=False, help="Sweep YAML: one model, level and generate (or --finding)"
    ),
    source: Path = typer.Option(..., "--source", help="A llama.cpp git checkout"),
    good: str = typer.Option(None, "--good", help="A ref without the regression (tag b7123, branch or sha)"),
    bad: str = typer.Option(None, "--bad", help="A later ref with it"),
    finding: int = typer.Option(
        None, "--finding", help="A confirmed llama.cpp regression: its series, its metric and its sides' commits"
    ),
    metric: str = typer.Option(None, "--metric", "-m", help=METRIC_HELP),
    min_effect: float = typer.Option(0.03, "--min-effect", help="Smallest change that counts (0.03 = 3%)"),
    cmake_flag: list[str] = typer.Option([], "--cmake-flag", help="More -DNAME=VALUE for every build"),
    tools: str = typer.Option("llama-bench", "--tools", help="Tools each build makes (comma-separated)"),
    models_dir: Path = typer.Option(None, "--models-dir", help="Models folder (default: SILICONBENCH_MODELS_DIR)"),
    fmt: str = typer.Option("table", "--format", help="table | json"),
) -> None:
    """Build midpoints between --good and --bad and decide each with the confirm statistics (interleaved fresh
    processes against both ends, sequential looks, the minimum effect). Exit 0: the first bad commit found;
    1: no regression between the ends; 3: a step could not decide."""
    from siliconbench.spec import load_sweep  # verb-local

    from coordinator.history.bisect_sweeps import finding_sweep  # verb-local
    from embedded.bisect import bisect as run_bisect  # verb-local

    s = settings(models_dir=models_dir)
    url = database(s)
    if finding is not None:
        if sweep is not None or good or bad:
            raise UserError("--finding", "a finding names the sweep, --good and --bad itself: give it alone.")
        spec, good, bad, found_metric = finding_sweep(url, finding)
        metric = metric or found_metric
    else:
        if sweep is None or not good or not bad:
            raise UserError("SWEEP", "give a sweep with --good and --bad, or --finding ID.")
        spec = load_sweep(sweep)
    quiet = fmt == "json"
    rec = run_bisect(
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
        say=None if quiet else (lambda m: console.print(m, style="dim", highlight=False)),
    )
    d = rec.as_dict()
    if quiet:
        print_json(d)
        raise typer.Exit(rec.exit_code)
    console.print(steps_table(d))
    if rec.skipped:
        console.print(f"skipped (did not build or run): {', '.join(c['sha'][:12] for c in rec.skipped)}")
    console.print(outcome_line(d), highlight=False)
    raise typer.Exit(rec.exit_code)


def outcome_line(rec: dict) -> str:
    """How a finished bisection (this machine's or the fleet's) ended, in words a person acts on."""
    if rec["outcome"] == "found":
        f = rec["first_bad"]
        named = f", {f['describe']}" if f.get("describe") else ""
        return (
            f"[bold]first bad commit[/]: {f['sha']} (b{f['number']}{named}) {f['subject']!r}\n"
            f"effect on {rec['metric']}, last good -> first bad: {_ratio(rec['effect'])}"
        )
    if rec["outcome"] == "no regression":
        return (
            f"no regression of {rec['metric']} between {rec['good']['label']} and {rec['bad']['label']}: "
            f"{_ratio(rec['effect'])} (minimum effect {rec['min_effect']:.0%})"
        )
    return (
        "[bold yellow]undecided[/]: the last step's evidence did not decide at the last look; nothing is guessed. "
        "Run again on a quieter host, or with a larger --min-effect."
    )
