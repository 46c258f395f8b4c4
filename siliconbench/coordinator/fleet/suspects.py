"""Suspect hosts: a host whose series disagree with its SKU peers' beyond their noise (same version, same
configuration). The statistics only: no database here (``siliconbench.coordinator.fleet.peers`` stores and lists them).

``suspect_hosts``: for each series at one engine version, each host's per-process values
(its candidate side) against the pooled processes of the other hosts of its SKU (leave-one-out baseline), with
``significance.compare_processes`` (Mann-Whitney U, Hodges-Lehmann ratio host / peers, Moses 95% CI), read
one-sided: sick machines (throttled, busy, misconfigured) are slow. A host is *slower* in a series when its
one-sided p is below the per-series level q and it is slower by at least the minimum effect **and** by more
than any one peer differs from the peers' pooled median (their own spread: "beyond their noise"). It is
flagged when it is slower in a strict majority of its k tested series, so one disturbed series never flags it.
Multiplicity: q is chosen so that, under no difference and independent series, a strict majority of k tests
at q happens with probability alpha / H (``series_level``; H = the SKU's hosts tested, a Bonferroni share,
since every series tests them all): at alpha = 0.01 the chance that some healthy host of an SKU is flagged in
one campaign is at most 1%, however many series it ran (q = 0.0025 for k = 1, 0.05 for 2, 0.029 for 3 when
H = 4), and more series give more power. With two hosts of an SKU the tests are mirror images: only the slower
can be flagged. Hosts without SKU peers, or with fewer than ``MIN_PROCESSES`` processes, are never tested.

**Paired by round** where the results say which processes ran together: a campaign's look (and the benchmark's
round) is one sweep placed on each host at once, so a host's j-th process of a series in a sweep ran beside
each peer's j-th. Whatever changes from one round to the next (the machine's other load, a file cache, the
room's temperature) then falls on both, and the test is on each round's log ratio host / peers' median of
that round: Wilcoxon's signed-rank test, one-sided, with the Hodges-Lehmann ratio (the median of the Walsh
averages) and its distribution-free 95% interval. That is used when at least ``MIN_PROCESSES`` of the host's
processes have a peer in their round; otherwise (seeded histories without rounds, uneven sweeps) the
unpaired test above. The same level q applies to both, each valid under no difference.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field

from siliconbench.contract.aggregate import summarize
from siliconbench.contract.engines import ENGINE_PACKAGE
from siliconbench.contract.metrics import get as get_metric

from siliconbench.coordinator.history.points import Point, series_id, series_label
from siliconbench.coordinator.stats.significance import CI_LEVEL, DEFAULT_MIN_EFFECT, compare_processes, process_values

SUSPECT_ALPHA = 0.01  # per SKU and campaign: the chance that some healthy host is flagged, at most
MIN_PROCESSES = 4  # a host's processes in a series; fewer are not tested


@dataclass
class PeerTest:
    """One host's series against its SKU peers' (leave-one-out): ratio = host / peers, signed by nothing."""

    host: str
    sku: str
    series: str  # label, with the engine version
    series_id: str
    metric: str
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None  # one-sided: the host slower
    slower: bool  # p below ``alpha`` (the per-series level) and at least ``min_effect`` slower
    alpha: float
    min_effect: float
    peers: list[str]
    n_host: int
    n_peers: int
    job_ids: list[str] = field(default_factory=list)
    hosts_tested: int = 2  # of the SKU in this series: the Bonferroni share
    reason: str = ""
    paired: bool = False  # by round (Wilcoxon signed-rank on the rounds' ratios), else Mann-Whitney

    def as_dict(self) -> dict:
        return asdict(self)


def group_points(points: list[Point], metric: str) -> dict[tuple[str, str], dict[str, tuple[list, list, list]]]:
    """{(series id, label): {host: (processes' raw samples, job ids, rounds)}}: one series at one engine version.
    A process's round is (its sweep, its rank among the host's processes of the series in that sweep, by time)."""
    out: dict = {}
    for p in sorted(points, key=lambda p: (p.sweep_id, p.when, p.job_id)):
        raw = p.samples.get(metric) or ([p.reported[metric]] if metric in p.reported else [])
        if not raw:
            continue
        version = p.engine_package_version or p.engine_version or "?"
        sid = series_id(p, metric, ("host",)) + ":" + version
        label = f"{series_label(p, metric, ('host',))} · {ENGINE_PACKAGE.get(p.engine, p.engine)} {version}"
        procs, jobs, rounds = out.setdefault((sid, label), {}).setdefault(p.host, ([], [], []))
        rounds.append((p.sweep_id, sum(r[0] == p.sweep_id for r in rounds)))
        procs.append(raw)
        jobs.append(p.job_id)
    return out


def peer_tests(
    data,
    skus: dict[str, str],
    metric: str,
    *,
    min_effect: float = DEFAULT_MIN_EFFECT,
    min_processes: int = MIN_PROCESSES,
) -> list[PeerTest]:
    """Every (host, series) that has SKU peers, tested (``slower`` is left False: ``suspect_hosts`` sets the
    level). ``data``: Points, or {series: {host: [processes' raw samples]}}."""
    if isinstance(data, list):
        groups = group_points(data, metric)
    else:  # seeded histories: no rounds, so unpaired
        groups = {(s, s): {h: (procs, [], []) for h, procs in hosts.items()} for s, hosts in data.items()}
    worse_is_lower = get_metric(metric).better == "higher"
    tests = []
    for (sid, label), hosts in groups.items():
        by_sku: dict[str, list[str]] = {}
        for h, (procs, *_) in hosts.items():
            if h in skus and len(process_values(procs)) >= min_processes:
                by_sku.setdefault(skus[h], []).append(h)
        for sku, members in by_sku.items():
            if len(members) < 2:
                continue
            for h in sorted(members):
                peers = sorted(m for m in members if m != h)
                peer_values = [process_values(hosts[m][0]) for m in peers]
                eff = max(min_effect, _spread(peer_values))
                logs = round_log_ratios(hosts[h], [hosts[m] for m in peers])
                if len(logs) >= min_processes:
                    ratio, lo, hi, p1 = _paired(logs, worse_is_lower)
                    n_host, n_peers, paired = len(logs), sum(map(len, peer_values)), True
                else:
                    pooled = [p for m in peers for p in hosts[m][0]]
                    c = compare_processes(pooled, hosts[h][0], metric, alpha=1.0 - 1e-9)  # alpha: always a p-value
                    ratio, lo, hi, p1 = c.ratio, c.ci_low, c.ci_high, None
                    if c.p_value is not None and c.ratio is not None:
                        worse = c.ratio != 1 and (c.ratio < 1) == worse_is_lower
                        p1 = c.p_value / 2 if worse else 1 - c.p_value / 2
                    n_host, n_peers, paired = c.n_candidate, c.n_baseline, False
                tests.append(
                    PeerTest(
                        h,
                        sku,
                        label,
                        sid,
                        metric,
                        ratio,
                        lo,
                        hi,
                        p1,
                        False,
                        1.0,
                        eff,
                        peers,
                        n_host,
                        n_peers,
                        list(hosts[h][1]),
                        hosts_tested=len(members),
                        paired=paired,
                    )
                )
    return tests


def round_log_ratios(host: tuple, peers: list[tuple]) -> list[float]:
    """log(host's process / the peers' median process) for each of the host's rounds that a peer also ran."""
    by_round: dict = {}
    for procs, _, rounds in peers:
        for raw, r in zip(procs, rounds, strict=False):  # rounds: [] where none were recorded
            if (s := summarize(list(raw))) is not None and s.median > 0:
                by_round.setdefault(r, []).append(s.median)
    out = []
    for raw, r in zip(host[0], host[2], strict=False):  # host[2]: [] where no rounds were recorded
        if r in by_round and (s := summarize(list(raw))) is not None and s.median > 0:
            out.append(math.log(s.median) - math.log(statistics.median(by_round[r])))
    return out


_Z_CI = statistics.NormalDist().inv_cdf(0.5 + CI_LEVEL / 2)  # the two-sided interval's normal quantile


def _paired(logs: list[float], worse_is_lower: bool) -> tuple[float, float | None, float | None, float]:
    """Ratio (Hodges-Lehmann: the median Walsh average), its interval, and the one-sided signed-rank p."""
    n = len(logs)
    walsh = sorted((logs[i] + logs[j]) / 2 for i in range(n) for j in range(i, n))
    # The interval's rank from the signed-rank statistic's normal approximation (Hollander & Wolfe 3.2).
    k = int(math.floor(n * (n + 1) / 4 - _Z_CI * math.sqrt(n * (n + 1) * (2 * n + 1) / 24)))
    lo, hi = (math.exp(walsh[k]), math.exp(walsh[-k - 1])) if 0 <= k < len(walsh) // 2 else (None, None)
    if len(set(logs)) == 1 and logs[0] == 0:
        return 1.0, lo, hi, 1.0
    # Imported here: scipy.stats costs ~1 s of CPU to import, and `siliconbench workers` reaches this module for
    # sku_of alone.
    from scipy.stats import wilcoxon

    p = float(wilcoxon(logs, alternative="less" if worse_is_lower else "greater").pvalue)
    return math.exp(statistics.median(walsh)), lo, hi, p


def _spread(peer_values: list[list[float]]) -> float:
    """How far any one peer's median sits from the peers' pooled median (0 with one peer)."""
    if len(peer_values) < 2:
        return 0.0
    pooled = statistics.median(v for vs in peer_values for v in vs)
    return max(abs(statistics.median(vs) / pooled - 1.0) for vs in peer_values) if pooled else 0.0


def series_level(k: int, target: float) -> float:
    """The per-series level q at which a strict majority of k independent tests is significant with
    probability ``target`` under no difference: P(Binomial(k, q) > k/2) = target."""
    need = k // 2 + 1
    tail = lambda q: sum(math.comb(k, i) * q**i * (1 - q) ** (k - i) for i in range(need, k + 1))  # noqa: E731
    lo, hi = 0.0, 1.0
    for _ in range(60):
        lo, hi = ((lo + hi) / 2, hi) if tail((lo + hi) / 2) < target else (lo, (lo + hi) / 2)
    return lo


def suspect_hosts(
    data, skus: dict[str, str], metric: str = "decode_tps", *, alpha: float = SUSPECT_ALPHA, **kw
) -> list[PeerTest]:
    """The tests of every flagged host (all its tested series, so all its results are marked), reason filled."""
    by_host: dict[str, list[PeerTest]] = {}
    for t in peer_tests(data, skus, metric, **kw):
        by_host.setdefault(t.host, []).append(t)
    out = []
    for _host, ts in sorted(by_host.items()):
        q = series_level(len(ts), alpha / max(t.hosts_tested for t in ts))
        for t in ts:
            t.alpha = q
            t.slower = t.p_value is not None and t.p_value < q and abs(t.ratio - 1) >= t.min_effect
        slow = sum(t.slower for t in ts)
        if slow * 2 <= len(ts):
            continue
        for t in ts:
            ci = f"{t.ci_low:.3f}–{t.ci_high:.3f}" if t.ci_low is not None else "—"
            test = "Wilcoxon signed-rank, paired by round" if t.paired else "Mann-Whitney"
            t.reason = (
                f"slower than its {len(t.peers)} SKU peer(s) beyond their noise in {slow} of {len(ts)} "
                f"series (one-sided {test} p < {q:.2g} and over {t.min_effect:.1%} slower); "
                f"here {metric} ratio {t.ratio:.3f} (95% CI {ci}), p {_p(t.p_value)}"
            )
            out.append(t)
    return out


def _p(p: float | None) -> str:
    return "—" if p is None else f"{p:.2g}" if p >= 1e-4 else f"{p:.1e}"
