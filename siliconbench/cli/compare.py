"""`siliconbench compare | regressions`: is it slower, and since when (`confirm` and the llama-bench interop are
their own modules)."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

import typer

from siliconbench.storage.database import session_scope

from .common import EXIT_FAILED_JOBS, check_format, console, database, emit, print_json, settings, user_errors

METRIC_HELP = "Metric to compare (repeatable; default prefill_tps, decode_tps, ttft_ms)"
SELECTOR_HELP = (
    "comma-separated key=value terms, all must hold: sweep, host, engine, model, quant, source, "
    "job, since, until, date, version, or a component (mlx-lm, mlx, llama-cpp-python, llama.cpp, "
    "os, python, blas, backend); values may use * globs"
)


DISTURBED_HELP = (
    "Also the results that ran disturbed (throttled or contended: the host was hot or busy), which "
    "are left out by default"
)


def _say_left_out(url: str, included: bool) -> None:
    """How many disturbed results the verb left out (or took in), beside its answer."""
    from siliconbench.coordinator.reads.queries import Filters, disturbed_results, left_out_note  # verb-local

    with session_scope(url) as s:
        note = left_out_note(disturbed_results(s, Filters()), included, show="pass --include-disturbed")
    if note:
        console.print(note, style="yellow", highlight=False)


@user_errors
def compare(
    baseline: str = typer.Option(..., "--baseline", "-b", help=f"Baseline selector: {SELECTOR_HELP}"),
    candidate: str = typer.Option(..., "--candidate", "-c", help="Candidate selector (same keys)"),
    metric: list[str] = typer.Option([], "--metric", "-m", help=METRIC_HELP),
    min_effect: float = typer.Option(0.03, "--min-effect", help="Smallest change that counts (0.03 = 3%)"),
    alpha: float = typer.Option(
        0.05, "--alpha", help="Significance level of the Mann-Whitney U test on per-process medians"
    ),
    fmt: str = typer.Option("table", "--format", help="table | csv | json | md"),
    out: Path = typer.Option(None, "--out", help="Write to this file instead of stdout"),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help="Exit 1 if any row is a regression"),
    include_disturbed: bool = typer.Option(False, "--include-disturbed", help=DISTURBED_HELP),
) -> None:
    """Baseline vs candidate per series: each process (job) one sample; ratio with its 95% CI, Mann-Whitney U p,
    and a verdict that needs both p < alpha and the minimum effect."""
    from siliconbench.contract.metrics import HEADLINE  # verb-local

    from siliconbench.coordinator.history.compare import Verdict, compare_db, counts, render, rich_table  # verb-local

    url = database(settings())
    rows = compare_db(
        url,
        baseline,
        candidate,
        metrics=tuple(metric) or HEADLINE,
        alpha=alpha,
        min_effect=min_effect,
        include_disturbed=include_disturbed,
    )
    title = (
        f"candidate ({candidate}) vs baseline ({baseline}): one sample per process (the median of its "
        f"repetitions); Hodges-Lehmann ratio, Mann-Whitney U, alpha {alpha}, min effect {min_effect:.0%}"
    )
    if fmt == "table":
        if not rows:
            console.print("No series was measured on both sides.")
        else:
            console.print(rich_table(rows, title=title))
            c = counts(rows)
            console.print(", ".join(f"{n} {v}" for v, n in c.items() if n), style="bold", highlight=False)
        _say_left_out(url, include_disturbed)
    else:
        emit(render(rows, fmt, title=title), out)
    if fail_on_regression and any(r.comparison.verdict == Verdict.regression for r in rows):
        raise typer.Exit(EXIT_FAILED_JOBS)


@user_errors
def regressions(
    ctx: typer.Context,
    metric: list[str] = typer.Option([], "--metric", "-m", help=METRIC_HELP),
    where: str = typer.Option(None, "--where", help=f"Only points matching this selector: {SELECTOR_HELP}"),
    min_effect: float = typer.Option(0.03, "--min-effect", help="Smallest step that counts (0.03 = 3%)"),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level of each step's test"),
    save: bool = typer.Option(True, "--save/--no-save", help="Record each step as a finding (for confirm)"),
    fmt: str = typer.Option("table", "--format", help="table | json"),
    include_disturbed: bool = typer.Option(False, "--include-disturbed", help=DISTURBED_HELP),
    since: str = typer.Option(
        None,
        "--since",
        help="Instead of searching: list the verdicts (campaign findings, "
        "suspect hosts, failed campaigns, findings) created since an ISO date or date-time, "
        "or a duration back from now (30m, 24h, 7d, 2w)",
    ),
) -> None:
    """Change points in every series' history (ruptures PELT, each step tested), with what changed there;
    with --since, the verdicts recorded since then (for scripts: --format json). `regressions bisect` finds the
    llama.cpp commit that caused one."""
    if ctx.invoked_subcommand is not None:
        return
    if since is not None:
        return _verdicts_since(since, fmt)
    from rich.table import Table  # verb-local

    from siliconbench.contract.metrics import HEADLINE  # verb-local

    from siliconbench.coordinator.history.compare import Verdict  # verb-local
    from siliconbench.coordinator.history.load import load_points  # verb-local
    from siliconbench.coordinator.history.points import describe_changes  # verb-local
    from siliconbench.coordinator.history.regressions import find_steps, save_findings  # verb-local
    from siliconbench.coordinator.history.selectors import parse_selector  # verb-local

    url = database(settings())
    opts = dict(
        metrics=tuple(metric) or HEADLINE,
        selector=parse_selector(where, "--where") if where else None,
        alpha=alpha,
        min_effect=min_effect,
    )
    with session_scope(url) as s:
        points = load_points(s, include_disturbed=include_disturbed)
        proposed = find_steps(points, keep_all=True, **opts)  # kept steps and the ones too thin to test
        steps = [st for st in proposed if st.comparison.verdict in (Verdict.regression, Verdict.improvement)]
        if save:
            save_findings(s, steps)
    if fmt == "json":
        print_json([st.as_dict() for st in steps])
        return
    _say_left_out(url, include_disturbed)
    untested = [st for st in proposed if st.comparison.p_value is None]
    if untested:  # PELT saw a step the test cannot judge yet: say so rather than stay silent
        u = untested[0]
        console.print(
            f"{len(untested)} proposed step(s) not tested yet: fewer than 4 results (processes) on a side, "
            f"e.g. {u.series} {u.metric} at {u.index}/{u.n_points} ({describe_changes(u.changes)}). "
            "Run more processes of each side (a sweep's `processes:`).",
            style="yellow",
            highlight=False,
        )
    if not steps:
        console.print(
            f"No step in {len({p.job_id for p in points})} results passed the test "
            f"(alpha {alpha}, min effect {min_effect:.0%})."
        )
        return
    t = Table(title="steps in series histories (ordered by version, then time)", title_justify="left")
    for c in ("finding", "series", "metric", "at", "before → after (median)", "ratio", "p", "verdict", "what changed"):
        t.add_column(c)
    for st in steps:
        c = st.comparison
        colour = "red" if c.verdict.value == "regression" else "green"
        t.add_row(
            str(st.finding_id or "—"),
            st.series,
            st.metric,
            f"{st.index}/{st.n_points}",
            f"{c.baseline_median:,.1f} → {c.candidate_median:,.1f}",
            f"{c.ratio:.3f}",
            f"{c.p_value:.2g}",
            f"[{colour}]{c.verdict.value}[/]",
            ", ".join(f"{k} {a or '—'} → {b or '—'}" for k, (a, b) in st.changes.items()) or "nothing recorded",
        )
    console.print(t)
    if save:
        console.print("Confirm one with `siliconbench confirm FINDING` (A/B/A/B on this host).", style="dim")


def _verdicts_since(since: str, fmt: str) -> None:
    from rich.table import Table  # verb-local

    from siliconbench.coordinator.watch.messages import parse_since, since as verdicts_since  # verb-local

    check_format(fmt)
    when = parse_since(since).astimezone(UTC)
    with session_scope(database(settings())) as s:
        rows = verdicts_since(s, when)
    if fmt == "json":
        print_json(rows)
        return
    if not rows:
        console.print(f"No verdict since {when:%Y-%m-%d %H:%M} UTC.", highlight=False)
        return
    t = Table(title=f"verdicts since {when:%Y-%m-%d %H:%M} UTC, newest first", title_justify="left")
    for c in ("when", "kind", "id", "delivery", "message"):
        t.add_column(c, overflow="fold")
    for r in rows:
        tries = f" ({r['attempts']} tries: {r['last_error']})" if r["last_error"] else ""
        t.add_row(
            (r["created_at"] or "")[:19], r["kind"], f"{r['source']} {r['id']}", r["delivery"] + tries, r["message"]
        )
    console.print(t)
