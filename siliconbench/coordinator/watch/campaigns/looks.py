"""A campaign's looks: one sweep per look of the group-sequential design, and each series' decision per host.

Look k's sweep is the watch's suite on the campaign's engine only, ``engine_versions: {engine: [baseline,
candidate]}``, pinned to the ready hosts with ``placement: each`` (every host runs every job, in order), and
``processes`` = the look's increment (5, 3, 3, 4 for looks at 5/8/11/15 a side). Inside a sweep every round runs
baseline then candidate (``siliconbench.contract.jobs.interleave``); the looks run one after the other, so the
concatenated processes keep the A/B/A/B order that ``sequential.decide`` reads them in. Each look runs the
**whole suite**, also the series already decided: a sweep cannot name a subset of its matrix's series, and a
decided series' extra processes are ignored (``decide`` stops at its first decisive look), so it costs
machine time only, never validity. The watch's ``processes`` is the last look (default 15); looks beyond it
are dropped, and a cap above 15 adds one last look there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from siliconbench.contract.errors import UserError
from siliconbench.contract.metrics import HEADLINE
from siliconbench.contract.spec import SweepSpec, load_sweep, parse_sweep

from siliconbench.coordinator.history.compare import process_samples
from siliconbench.coordinator.history.points import Point, series_id, series_label
from siliconbench.coordinator.stats.sequential import LOOKS, Decision, decide, look_increment
from siliconbench.storage.watch_tables import Campaign


def looks_of(doc: dict) -> tuple[int, ...]:
    """Processes a side at each look: the sequential design's looks (5/8/11/15), cut at the watch's
    ``processes`` (its last look; the spending function keeps the overall alpha whatever the looks)."""
    cap = doc.get("processes")
    if not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0 or cap == LOOKS[-1]:
        return LOOKS
    return tuple(n for n in LOOKS if n < cap) + (cap,)


def metrics_of(doc: dict) -> tuple[str, ...]:
    return tuple(doc.get("metrics") or HEADLINE)


def suite_of(doc: dict) -> dict:
    """The watch's suite as a sweep document (given inline, or as a path to a sweep file)."""
    suite = doc.get("suite")
    if isinstance(suite, str):
        suite = load_sweep(suite).model_dump(mode="json", by_alias=True, exclude_unset=True)
    if not isinstance(suite, dict):
        raise UserError("suite", "the watch names no suite (a sweep: models, workloads ...).")
    return dict(suite)


def sweep_spec(c: Campaign, doc: dict, hosts: list[str], *, name: str, processes: int) -> SweepSpec:
    data = {
        **suite_of(doc),
        "name": name,
        "engines": [c.engine],
        "hosts": sorted(hosts),
        "placement": "each",
        "engine_versions": {c.engine: [c.baseline, c.candidate]},
        "processes": processes,
        "install_versions": False,
    }
    return parse_sweep(data, source=f"watch {c.watch}: suite")


def look_sweep_id(c: Campaign, look: int) -> str:
    return f"campaign-{c.id}-look{look}"


def look_spec(c: Campaign, doc: dict, look: int, hosts: list[str]) -> SweepSpec:
    """Look ``look`` (1-based): the increment of processes a side since the previous look."""
    return sweep_spec(c, doc, hosts, name=look_sweep_id(c, look), processes=look_increment(look, looks_of(doc)))


@dataclass
class Series:
    """One series (across hosts) and metric: each host's baseline and candidate processes in run order."""

    series_id: str
    label: str
    metric: str
    sides: dict[str, tuple[list, list]] = field(default_factory=dict)  # host -> (baseline, candidate) samples
    points: dict[str, tuple[list, list]] = field(default_factory=dict)  # host -> (baseline, candidate) Points


def group(points: list[Point], c: Campaign, metrics, sweep_order: list[str]) -> dict[tuple[str, str], Series]:
    """{(series id, metric): Series}, each host's processes in the order they ran (look, then start time)."""
    rank = {sid: i for i, sid in enumerate(sweep_order)}
    out: dict[tuple[str, str], Series] = {}
    for p in sorted(points, key=lambda p: (rank.get(p.sweep_id, len(rank)), p.when)):
        side = {c.baseline: 0, c.candidate: 1}.get(p.engine_version)
        if side is None:
            continue
        for m in metrics:
            raw = process_samples([p], m)
            if not raw:
                continue
            key = (series_id(p, m, ("host",)), m)
            s = out.setdefault(key, Series(key[0], series_label(p, m, ("host",)), m))
            s.sides.setdefault(p.host, ([], []))[side].append(raw[0])
            s.points.setdefault(p.host, ([], []))[side].append(p)
    return out


def decisions(series: dict[tuple[str, str], Series], hosts: list[str], looks) -> dict[tuple[str, str], dict]:
    """{(series id, metric): {host: Decision}}; a host without processes of a series has an undecided one."""
    out = {}
    for key, s in series.items():
        out[key] = {h: decide(*s.sides.get(h, ([], [])), s.metric, looks=looks) for h in hosts}
    return out


def undecided(decided: dict[tuple[str, str], dict[str, Decision]]) -> list[tuple[str, str]]:
    return sorted(k for k, per_host in decided.items() if any(not d.decided for d in per_host.values()))


def decision_dict(d: Decision) -> dict:
    c = d.comparison
    return {
        "verdict": d.verdict.value,
        "decided": d.decided,
        "processes": d.processes,
        "look": d.look,
        "ratio": c.ratio if c else None,
        "ci_low": c.ci_low if c else None,
        "ci_high": c.ci_high if c else None,
        "p_value": c.p_value if c else None,
        "reason": c.reason if c else "",  # what it rests on; an inconclusive one, what would resolve it
        "needed_processes": c.needed_processes if c else None,
    }
