"""Baseline against candidate, per series and metric, with statistics that can be trusted.

For each series both sides measured, one row per metric: the per-process medians of each side, the
Hodges-Lehmann ratio candidate / baseline with its 95% confidence interval, the Mann-Whitney U p-value
and a verdict that needs significance and a minimum effect, signed by the metric's direction. The
statistics live in ``siliconbench.coordinator.stats.significance``; the unit of evidence there is the process (one job),
never a repetition inside it. This module picks the sides, pairs series and renders the rows.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field

from rich.table import Table

from siliconbench.contract.aggregate import summarize
from siliconbench.contract.errors import UserError
from siliconbench.contract.metrics import HEADLINE, METRICS
from siliconbench.contract.spec import COMPARE_PROCESSES

from siliconbench.coordinator.history.load import load_points
from siliconbench.coordinator.history.points import Point, series_id, series_key, series_label
from siliconbench.coordinator.history.selectors import Selector, check_keys, parse_selector, select
from siliconbench.coordinator.stats.significance import (
    DEFAULT_ALPHA,
    DEFAULT_MIN_EFFECT,
    MAX_NEEDED,
    Comparison,
    Verdict,
    compare_processes,
    min_p_value,
    process_values,
)
from siliconbench.storage.database import session_scope

FORMATS = ("table", "csv", "json", "md")


def _need_scipy():
    try:
        import scipy.stats  # noqa: F401
    except ImportError:
        raise UserError("compare", "needs scipy: pip install 'siliconbench[analysis]'.") from None


def process_samples(points: list[Point], metric: str) -> list[list[float]]:
    """Each point (one job, one fresh process) as its raw samples, or its reported aggregate if it has none."""
    out = []
    for p in points:
        raw = p.samples.get(metric) or ([p.reported[metric]] if metric in p.reported else [])
        if raw:
            out.append(raw)
    return out


# --------------------------------------------------------------------------------------------- rows


@dataclass
class Row:
    series: str
    series_id: str
    comparison: Comparison
    baseline: str  # the components that differ between the sides, baseline's values
    candidate: str
    n_results: tuple[int, int]
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "series": self.series,
            "series_id": self.series_id,
            **self.comparison.as_dict(),
            "baseline": self.baseline,
            "candidate": self.candidate,
            "baseline_results": self.n_results[0],
            "candidate_results": self.n_results[1],
            "notes": "; ".join(self.notes),
        }


def _differing(bs: list[Point], cs: list[Point]) -> tuple[str, str]:
    keys = sorted({k for p in bs + cs for k in p.components})
    left, right = [], []
    for k in keys:
        a = sorted({p.components.get(k) or "—" for p in bs})
        b = sorted({p.components.get(k) or "—" for p in cs})
        if a != b:
            left.append(f"{k} {'/'.join(a)}")
            right.append(f"{k} {'/'.join(b)}")
    return ", ".join(left), ", ".join(right)


def _across(b: Selector, c: Selector) -> tuple[str, ...]:
    """Dimensions both selectors set, to different values: series pair across them (host A vs host B)."""
    return tuple(
        k
        for k in ("host", "engine", "model", "quant")
        if b.value(k) is not None and c.value(k) is not None and b.value(k) != c.value(k)
    )


def compare_points(
    points: list[Point],
    baseline: Selector,
    candidate: Selector,
    *,
    metrics=HEADLINE,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
) -> list[Row]:
    """One row per (series, metric) measured on both sides, in series order."""
    _need_scipy()
    check_keys([("--baseline", baseline), ("--candidate", candidate)], points)
    for m in metrics:
        if m not in METRICS:
            raise UserError("--metric", f"unknown metric {m!r}.", list(METRICS))
    if not (0 < alpha < 1):
        raise UserError("--alpha", f"{alpha} must be between 0 and 1.")
    if not (0 <= min_effect < 1):
        raise UserError("--min-effect", f"{min_effect} must be a fraction between 0 and 1 (0.03 = 3%).")
    b_pts, c_pts = select(points, baseline, "--baseline"), select(points, candidate, "--candidate")
    both = {p.job_id for p in b_pts} & {p.job_id for p in c_pts}
    b_pts = [p for p in b_pts if p.job_id not in both]
    c_pts = [p for p in c_pts if p.job_id not in both]
    across = _across(baseline, candidate)
    rows: list[Row] = []
    for metric in metrics:
        groups: dict[str, tuple[list[Point], list[Point]]] = {}
        for side, pts in ((0, b_pts), (1, c_pts)):
            for p in pts:
                if metric in p.samples or metric in p.reported:
                    groups.setdefault(series_id(p, metric, across), ([], []))[side].append(p)
        for sid, (bs, cs) in groups.items():
            if not bs or not cs:
                continue
            procs = {"baseline": process_samples(bs, metric), "candidate": process_samples(cs, metric)}
            comp = compare_processes(procs["baseline"], procs["candidate"], metric, alpha=alpha, min_effect=min_effect)
            notes = []
            if both:
                notes.append(f"{len(both)} results matched both selectors and were left out")
            for name, side in (("baseline", bs), ("candidate", cs)):
                if not any(p.samples.get(metric) for p in side):
                    notes.append(f"{name} has no raw samples (an import of aggregates only)")
                envs = {tuple(sorted(p.components.items())) for p in side}
                if len(envs) > 1:
                    notes.append(f"{name} pools {len(envs)} different environments")
                s = summarize(process_values(procs[name]))
                if s is not None and s.unstable:
                    notes.append(f"{name} unstable (stddev of its processes {s.cv:.0%} of mean)")
            if min_p_value(comp.n_baseline, comp.n_candidate) >= alpha:
                notes.append(
                    f"{comp.n_baseline} vs {comp.n_candidate} processes cannot reach p < {alpha}: run "
                    f"more (a sweep's `processes:`; {COMPARE_PROCESSES} a side resolves 5%) or "
                    "`siliconbench confirm`"
                )
            elif min(comp.n_baseline, comp.n_candidate) < COMPARE_PROCESSES:
                notes.append(
                    f"{min(comp.n_baseline, comp.n_candidate)} processes on a side: a small change may go "
                    f"unseen ({COMPARE_PROCESSES} a side resolves 5%)"
                )
            left, right = _differing(bs, cs)
            rows.append(Row(series_label(bs[0], metric, across), sid, comp, left, right, (len(bs), len(cs)), notes))
    rows.sort(key=lambda r: (r.series, list(METRICS).index(r.comparison.metric)))
    return rows


def compare_db(url: str, baseline: str, candidate: str, include_disturbed: bool = False, **kw) -> list[Row]:
    b, c = parse_selector(baseline, "--baseline"), parse_selector(candidate, "--candidate")
    if not b.terms or not c.terms:
        raise UserError(
            "--baseline" if not b.terms else "--candidate",
            "an empty selector matches everything; name at least one key=value (e.g. mlx-lm=0.31.3).",
        )
    with session_scope(url) as s:
        points = load_points(s, include_disturbed=include_disturbed)
    return compare_points(points, b, c, **kw)


# ---------------------------------------------------------------------------------------- rendering

COLUMNS = (
    "series",
    "metric",
    "baseline",
    "candidate",
    "base median",
    "cand median",
    "ratio",
    "95% CI",
    "p",
    "verdict",
    "notes",
)


def _num(v: float | None, unit: str = "") -> str:
    if v is None:
        return "—"
    if abs(v) >= 1e6 and unit == "bytes":
        return f"{v / 2**20:,.1f} MiB"
    return f"{v:,.1f}" if abs(v) >= 100 else f"{v:,.3g}"


def cells(r: Row) -> list[str]:
    c = r.comparison
    ci = f"{c.ci_low:.3f}–{c.ci_high:.3f}" if c.ci_low is not None else "—"
    p = "—" if c.p_value is None else (f"{c.p_value:.2g}" if c.p_value >= 1e-4 else f"{c.p_value:.1e}")
    ratio = "—" if c.ratio is None else f"{c.ratio:.3f}"
    arrow = "↑" if c.better == "higher" else "↓"
    return [
        r.series,
        f"{c.metric} ({c.unit}, {arrow} better)",
        r.baseline or "—",
        r.candidate or "—",
        _num(c.baseline_median, c.unit),
        _num(c.candidate_median, c.unit),
        ratio,
        ci,
        p,
        _verdict_cell(c),
        "; ".join(r.notes),
    ]


def _verdict_cell(c: Comparison) -> str:
    """The verdict, and for an inconclusive one what would resolve it (processes a side at this effect and noise)."""
    if c.verdict == Verdict.inconclusive and c.needed_processes:
        more = ">" if c.needed_processes >= MAX_NEEDED else "≈"
        return f"inconclusive ({more}{c.needed_processes} procs/side)"
    return c.verdict.value


def render(rows: list[Row], fmt: str, title: str = "") -> str:
    if fmt not in FORMATS:
        raise UserError("--format", f"unknown format {fmt!r}.", list(FORMATS))
    if fmt == "json":
        return json.dumps([r.as_dict() for r in rows], indent=2)
    if fmt == "csv":
        buf = io.StringIO()
        dicts = [r.as_dict() for r in rows]
        w = csv.DictWriter(buf, fieldnames=list(dicts[0]) if dicts else ["series"])
        w.writeheader()
        w.writerows(dicts)
        return buf.getvalue()
    if fmt == "md":
        lines = [f"**{title}**", ""] if title else []
        lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
        for r in rows:
            cs = cells(r)
            cs[9] = f"**{cs[9]}**" if r.comparison.verdict in (Verdict.regression, Verdict.improvement) else cs[9]
            lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cs) + " |")
        return "\n".join(lines) + "\n"
    return ""  # table: the CLI prints rich_table(rows)


def rich_table(rows: list[Row], title: str = ""):
    t = Table(title=title, title_justify="left")
    for col in COLUMNS:
        t.add_column(col, justify="right" if col in ("base median", "cand median", "ratio", "p") else "left")
    style = {Verdict.regression: "[bold red]", Verdict.improvement: "[bold green]"}
    for r in rows:
        cs = cells(r)
        if r.comparison.verdict in style:
            cs[9] = f"{style[r.comparison.verdict]}{cs[9]}[/]"
        t.add_row(*cs)
    return t


def counts(rows: list[Row]) -> dict[str, int]:
    out = {v.value: 0 for v in Verdict}
    for r in rows:
        out[r.comparison.verdict.value] += 1
    return out


__all__ = [
    "Comparison",
    "Row",
    "Verdict",
    "compare_processes",
    "compare_points",
    "compare_db",
    "render",
    "rich_table",
    "series_key",
    "parse_selector",
]
