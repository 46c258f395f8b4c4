"""Baseline against candidate, per series and metric, with statistics that can be trusted.

For each series both sides measured, on the raw samples (warmups excluded):

- medians of each side (``siliconbench.aggregate.summarize``) and their ratio, candidate / baseline;
- a 95% confidence interval of that ratio: a percentile bootstrap of the ratio of medians
  (``scipy.stats.bootstrap``, 2,000 resamples of each side independently, fixed seed, so the same data
  always gives the same interval);
- the two-sided p-value of a Mann-Whitney U test (``scipy.stats.mannwhitneyu``; exact for small samples
  without ties, else the normal approximation with tie correction);
- a verdict: *regression* or *improvement* only when p < alpha (default 0.05) **and** the ratio moved by
  at least the minimum effect (default 3%), signed by the metric's direction in
  ``siliconbench.metrics`` (higher is better for tokens/s, lower for latency and memory); *no change*
  otherwise; *insufficient data* when a side has no raw samples or too few for any p-value to reach alpha.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import asdict, dataclass, field
from enum import Enum

from siliconbench.aggregate import summarize
from siliconbench.errors import UserError
from siliconbench.metrics import METRICS, get as get_metric

from .history import (Point, Selector, check_keys, parse_selector, select, series_id, series_key,
                      series_label)

DEFAULT_ALPHA = 0.05
DEFAULT_MIN_EFFECT = 0.03
DEFAULT_METRICS = ("prefill_tps", "decode_tps", "ttft_ms")
CI_LEVEL = 0.95
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
FORMATS = ("table", "csv", "json", "md")


class Verdict(str, Enum):
    regression = "regression"
    improvement = "improvement"
    no_change = "no change"
    insufficient = "insufficient data"


def _need_scipy():
    try:
        import scipy.stats  # noqa: F401
    except ImportError:
        raise UserError("compare", "needs scipy: pip install 'siliconbench[analysis]'.") from None


@dataclass
class Comparison:
    metric: str
    unit: str
    better: str
    n_baseline: int
    n_candidate: int
    baseline_median: float | None
    candidate_median: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: Verdict
    change_pct: float | None  # (ratio - 1) x 100, raw: its sign is not "good" or "bad" by itself

    def as_dict(self) -> dict:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        return d


def min_p_value(n1: int, n2: int) -> float:
    """The smallest two-sided p-value an exact Mann-Whitney U test can give for these sample sizes."""
    return 2.0 / math.comb(n1 + n2, n1) if n1 and n2 else 1.0


def ratio_ci(baseline: list[float], candidate: list[float], level: float = CI_LEVEL) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of median(candidate) / median(baseline); None if undefined."""
    import numpy as np
    from scipy.stats import bootstrap

    b, c = np.asarray(baseline, float), np.asarray(candidate, float)
    if len(b) < 2 or len(c) < 2 or np.median(b) == 0:
        return None

    def stat(x, y, axis=-1):
        return np.median(y, axis=axis) / np.median(x, axis=axis)

    res = bootstrap((b, c), stat, vectorized=True, paired=False, confidence_level=level,
                    n_resamples=BOOTSTRAP_RESAMPLES, method="percentile", rng=np.random.default_rng(BOOTSTRAP_SEED))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) else None


def compare_samples(baseline: list[float], candidate: list[float], metric: str, *, alpha: float = DEFAULT_ALPHA,
                    min_effect: float = DEFAULT_MIN_EFFECT, ci: bool = True) -> Comparison:
    """The statistics and verdict of one metric: the function every compare row and finding uses."""
    from scipy.stats import mannwhitneyu

    m = get_metric(metric)
    sb, sc = summarize(baseline), summarize(candidate)
    nb, nc = (sb.count if sb else 0), (sc.count if sc else 0)
    out = Comparison(metric, m.unit, m.better, nb, nc, sb.median if sb else None, sc.median if sc else None,
                     None, None, None, None, Verdict.insufficient, None)
    if not sb or not sc:
        return out
    if sb.median:
        out.ratio = sc.median / sb.median
        out.change_pct = (out.ratio - 1.0) * 100.0
    if nb < 2 or nc < 2 or min_p_value(nb, nc) >= alpha:
        return out  # no p-value could reach alpha: not "no change", just not enough to say
    if len(set(baseline) | set(candidate)) == 1:
        out.p_value = 1.0
    else:
        out.p_value = float(mannwhitneyu(candidate, baseline, alternative="two-sided").pvalue)
    if ci:
        bounds = ratio_ci(baseline, candidate)
        if bounds:
            out.ci_low, out.ci_high = bounds
    out.verdict = verdict(out.ratio, out.p_value, m.better, alpha, min_effect)
    return out


def verdict(ratio: float | None, p: float | None, better: str, alpha: float, min_effect: float) -> Verdict:
    if ratio is None or p is None:
        return Verdict.insufficient
    if p >= alpha or abs(ratio - 1.0) < min_effect:
        return Verdict.no_change
    worse = ratio < 1.0 if better == "higher" else ratio > 1.0
    return Verdict.regression if worse else Verdict.improvement


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
        return {"series": self.series, "series_id": self.series_id, **self.comparison.as_dict(),
                "baseline": self.baseline, "candidate": self.candidate, "baseline_results": self.n_results[0],
                "candidate_results": self.n_results[1], "notes": "; ".join(self.notes)}


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
    return tuple(k for k in ("host", "engine", "model", "quant")
                 if b.value(k) is not None and c.value(k) is not None and b.value(k) != c.value(k))


def compare_points(points: list[Point], baseline: Selector, candidate: Selector, *, metrics=DEFAULT_METRICS,
                   alpha: float = DEFAULT_ALPHA, min_effect: float = DEFAULT_MIN_EFFECT) -> list[Row]:
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
            base = [v for p in bs for v in p.samples.get(metric, [])]
            cand = [v for p in cs for v in p.samples.get(metric, [])]
            comp = compare_samples(base, cand, metric, alpha=alpha, min_effect=min_effect)
            notes = []
            if both:
                notes.append(f"{len(both)} results matched both selectors and were left out")
            for name, side in (("baseline", bs), ("candidate", cs)):
                if not any(p.samples.get(metric) for p in side):
                    notes.append(f"{name} has no raw samples (an import of aggregates only)")
                envs = {tuple(sorted(p.components.items())) for p in side}
                if len(envs) > 1:
                    notes.append(f"{name} pools {len(envs)} different environments")
                s = summarize([v for p in side for v in p.samples.get(metric, [])])
                if s is not None and s.unstable:
                    notes.append(f"{name} unstable (stddev {s.cv:.0%} of mean)")
            if len(bs) == 1 or len(cs) == 1:
                # benchmarks/regression_power.py: one process per side false-alarms far above alpha, because
                # repetitions inside one process share its layout and state; confirm pools several processes.
                notes.append("one process on a side: between-process variation is unmeasured, "
                             "so treat a verdict as a lead and run `siliconbench confirm`")
            left, right = _differing(bs, cs)
            rows.append(Row(series_label(bs[0], metric, across), sid, comp, left, right, (len(bs), len(cs)), notes))
    rows.sort(key=lambda r: (r.series, list(METRICS).index(r.comparison.metric)))
    return rows


def compare_db(url: str, baseline: str, candidate: str, **kw) -> list[Row]:
    from .database import session_scope
    from .history import load_points

    b, c = parse_selector(baseline, "--baseline"), parse_selector(candidate, "--candidate")
    if not b.terms or not c.terms:
        raise UserError("--baseline" if not b.terms else "--candidate", "an empty selector matches everything; "
                        "name at least one key=value (e.g. mlx-lm=0.31.3).")
    with session_scope(url) as s:
        points = load_points(s)
    return compare_points(points, b, c, **kw)


# ---------------------------------------------------------------------------------------- rendering

COLUMNS = ("series", "metric", "baseline", "candidate", "base median", "cand median", "ratio", "95% CI", "p",
           "verdict", "notes")


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
    return [r.series, f"{c.metric} ({c.unit}, {arrow} better)", r.baseline or "—", r.candidate or "—",
            _num(c.baseline_median, c.unit), _num(c.candidate_median, c.unit), ratio, ci, p, c.verdict.value,
            "; ".join(r.notes)]


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
    from rich.table import Table

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


__all__ = ["Comparison", "Row", "Verdict", "compare_samples", "compare_points", "compare_db", "render",
           "rich_table", "series_key", "parse_selector"]
