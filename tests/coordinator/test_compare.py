"""compare: the statistics on fixed samples, selectors and series pairing on a seeded store, and the CLI."""

from __future__ import annotations

import json
import math
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from siliconbench.contract.errors import UserError

from siliconbench.coordinator.history.compare import Verdict, compare_db, compare_processes, min_p_value, render
from siliconbench.coordinator.history.selectors import parse_selector
from siliconbench.storage import database as db
from tests.history_seed import seed_results

ROOT = Path(__file__).resolve().parents[2]


def processes(
    n: int, median: float = 100.0, *, seed: int = 0, between: float = 0.01, within: float = 0.005, reps: int = 5
) -> list[list[float]]:
    """n processes of ``reps`` samples: each process off the median by ``between``, each sample by ``within``."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        shift = median * (1 + rng.gauss(0, between))
        out.append([shift * (1 + rng.gauss(0, within)) for _ in range(reps)])
    return out


BASE = processes(8)


def scaled(procs, f):
    return [[x * f for x in p] for p in procs]


# ------------------------------------------------------------------------------------------ statistics


def test_slower_throughput_is_a_regression_with_a_ci_around_the_ratio():
    c = compare_processes(BASE, scaled(processes(8, seed=1), 0.90), "decode_tps")
    assert c.verdict == Verdict.regression and c.better == "higher"
    assert c.n_baseline == c.n_candidate == 8 and c.samples_baseline == 40  # processes are the samples
    assert c.ratio == pytest.approx(0.90, abs=0.01) and c.p_value < 0.01
    assert c.ci_low <= c.ratio <= c.ci_high and c.ci_high < 1.0
    again = compare_processes(BASE, scaled(processes(8, seed=1), 0.90), "decode_tps")
    assert (again.ci_low, again.ci_high, again.p_value) == (c.ci_low, c.ci_high, c.p_value)  # deterministic


def test_direction_comes_from_the_metric_registry():
    # Higher latency or memory is worse; higher tokens/s is better.
    assert compare_processes(BASE, scaled(BASE, 1.10), "ttft_ms").verdict == Verdict.regression
    assert compare_processes(BASE, scaled(BASE, 1.10), "peak_memory_bytes").verdict == Verdict.regression
    assert compare_processes(BASE, scaled(BASE, 1.10), "prefill_tps").verdict == Verdict.improvement
    assert compare_processes(BASE, scaled(BASE, 0.90), "ttft_ms").verdict == Verdict.improvement


def test_significant_but_small_is_equivalent_and_min_effect_is_configurable():
    c = compare_processes(BASE, scaled(BASE, 0.98), "decode_tps")
    assert c.p_value < 0.05 and c.verdict == Verdict.equivalent  # 2%, its interval inside the default 3%
    assert compare_processes(BASE, scaled(BASE, 0.98), "decode_tps", min_effect=0.01).verdict == Verdict.regression


def test_large_but_not_significant_is_inconclusive_never_no_change():
    a = [[100] * 5, [60] * 5, [140] * 5, [90] * 5, [110] * 5]
    b = [[95] * 5, [150] * 5, [55] * 5, [100] * 5, [85] * 5]
    c = compare_processes(a, b, "decode_tps")
    assert c.p_value > 0.05 and c.verdict == Verdict.inconclusive
    assert "neither a change" in c.reason and c.needed_processes and c.needed_processes > 5


def test_repetitions_inside_one_process_are_not_independent_samples():
    # One process a side, 5 tight repetitions each, 8% apart: what a pooled test called a regression
    # (benchmarks/regression_power.py measured 10-15% of A/A pairs called so) is only one sample a side here.
    a, b = processes(1, 100.0, seed=3), processes(1, 92.0, seed=4)
    c = compare_processes(a, b, "decode_tps")
    assert c.verdict == Verdict.inconclusive and c.p_value is None and c.ratio == pytest.approx(0.92, abs=0.02)
    assert "cannot reach p" in c.reason
    assert c.n_baseline == 1 and c.samples_baseline == 5


def test_one_disturbed_process_does_not_make_a_regression():
    a, b = processes(10, seed=5), processes(10, seed=6)
    b[3] = [x * 0.5 for x in b[3]]  # a neighbour's job landed on one process
    c = compare_processes(a, b, "decode_tps")
    assert c.verdict in (Verdict.equivalent, Verdict.inconclusive) and abs(c.ratio - 1) < 0.02


def test_too_few_processes_for_alpha_is_inconclusive_not_no_change():
    assert min_p_value(3, 3) == pytest.approx(0.1) and min_p_value(4, 4) < 0.05
    c = compare_processes(BASE[:3], scaled(BASE[:3], 0.5), "decode_tps")
    assert c.verdict == Verdict.inconclusive and c.p_value is None and c.ratio == pytest.approx(0.5)
    assert compare_processes(BASE[:4], scaled(BASE[:4], 0.5), "decode_tps").verdict == Verdict.regression
    assert compare_processes([], BASE, "decode_tps").verdict == Verdict.inconclusive
    assert compare_processes(BASE, BASE, "decode_tps").verdict == Verdict.equivalent


def test_hodges_lehmann_and_its_interval():
    # Every candidate process exactly 5% under its baseline twin: every pairwise ratio is known.
    c = compare_processes([[100.0]] * 6 + [[104.0]] * 6, [[95.0]] * 6 + [[98.8]] * 6, "decode_tps")
    assert c.ratio == pytest.approx(0.95 * 1.0, rel=0.03) and c.ci_low < c.ratio <= c.ci_high
    assert c.baseline_median == pytest.approx(102.0) and c.candidate_median == pytest.approx(96.9)


# ---------------------------------------------------------------------------------------- seeded store


@pytest.fixture
def store_url(tmp_path, models_dir):
    url = f"sqlite:///{tmp_path / 'cmp.sqlite'}"
    db.upgrade(url)
    runs = [
        {"mlx_lm": "0.31.3", "medians": {"prefill_tps": 5000, "decode_tps": 400, "ttft_ms": 12}, "day": 0},
        {"mlx_lm": "0.31.3", "medians": {"prefill_tps": 5000, "decode_tps": 400, "ttft_ms": 12}, "day": 1},
        {"mlx_lm": "0.32.2", "medians": {"prefill_tps": 5000, "decode_tps": 340, "ttft_ms": 12}, "day": 10},
        {"mlx_lm": "0.32.2", "medians": {"prefill_tps": 5000, "decode_tps": 340, "ttft_ms": 12}, "day": 11},
        {
            "mlx_lm": "0.32.2",
            "host": "mac-mini-2",
            "medians": {"prefill_tps": 6000, "decode_tps": 500, "ttft_ms": 10},
            "day": 12,
        },
    ]
    seed_results(url, models_dir, [dict(r, processes=3) for r in runs])  # 6 processes a side per version here
    yield url
    db.dispose(url)


def test_versions_pair_within_each_series_and_hosts_stay_apart(store_url):
    rows = compare_db(store_url, "mlx-lm=0.31.3", "mlx-lm=0.32.2")
    assert len(rows) == 3  # mac-mini-2 has no baseline: not compared with this host
    by = {r.comparison.metric: r for r in rows}
    assert by["decode_tps"].comparison.verdict == Verdict.regression
    assert by["decode_tps"].comparison.n_baseline == 6 and by["decode_tps"].n_results == (6, 6)
    assert by["decode_tps"].comparison.samples_baseline == 30
    assert by["prefill_tps"].comparison.verdict in (Verdict.equivalent, Verdict.inconclusive)
    assert by["decode_tps"].baseline == "mlx-lm 0.31.3" and by["decode_tps"].candidate == "mlx-lm 0.32.2"
    assert socket.gethostname() in by["decode_tps"].series


def test_host_selectors_pair_series_across_hosts(store_url):
    rows = compare_db(store_url, f"host={socket.gethostname()},mlx-lm=0.32.2", "host=mac-mini-2")
    by = {r.comparison.metric: r for r in rows}
    assert by["decode_tps"].comparison.verdict == Verdict.improvement
    assert by["ttft_ms"].comparison.verdict == Verdict.improvement  # lower is better
    assert "mac-mini-2" not in by["decode_tps"].series


def test_date_and_sweep_selectors(store_url):
    rows = compare_db(
        store_url, "until=2026-11-02", "since=2026-11-12,host=" + socket.gethostname(), metrics=("decode_tps",)
    )
    assert [r.n_results for r in rows] == [(6, 3)]
    rows = compare_db(store_url, "sweep=history-000", "sweep=history-00[23]", metrics=("decode_tps",))
    assert rows[0].n_results == (3, 6)
    rows = compare_db(
        store_url, "mlx-lm=0.31.*", "since=2026-11-02,host=" + socket.gethostname(), metrics=("decode_tps",)
    )
    assert rows[0].n_results == (3, 6) and "left out" in rows[0].notes[0]  # the overlap is not counted twice
    rows = compare_db(store_url, "date=2026-11-01", "date=2026-11-02", metrics=("decode_tps",))
    assert rows[0].n_results == (3, 3) and "cannot reach p < 0.05" in " ".join(rows[0].notes)
    assert rows[0].comparison.verdict == Verdict.inconclusive


def test_bad_selectors_name_the_valid_keys(store_url):
    with pytest.raises(UserError) as err:
        compare_db(store_url, "mlxlm=0.31.3", "mlx-lm=0.32.2")
    assert err.value.field == "--baseline" and "mlx-lm" in err.value.choices and "host" in err.value.choices
    with pytest.raises(UserError):
        parse_selector("mlx-lm", "--candidate")
    with pytest.raises(UserError):
        compare_db(store_url, "", "mlx-lm=0.32.2")
    with pytest.raises(UserError) as err:
        compare_db(store_url, "mlx-lm=0.31.3", "mlx-lm=0.32.2", metrics=("tokens",))
    assert err.value.field == "--metric"


def test_formats(store_url):
    rows = compare_db(store_url, "mlx-lm=0.31.3", "mlx-lm=0.32.2")
    data = json.loads(render(rows, "json"))
    assert {d["verdict"] for d in data} <= {"regression", "equivalent", "inconclusive"} and "regression" in {
        d["verdict"] for d in data
    }
    assert {"p_value", "ci_low", "ci_high", "ratio", "baseline_median", "better", "unit"} <= set(data[0])
    csv_text = render(rows, "csv")
    assert csv_text.splitlines()[0].startswith("series,series_id,metric") and len(csv_text.splitlines()) == 4
    md = render(rows, "md", title="t")
    assert "| series | metric |" in md and "**regression**" in md
    with pytest.raises(UserError):
        render(rows, "xml")


def sb(*args, url):
    env = {**os.environ, "SILICONBENCH_DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_cli_compare_table_md_and_exit_status(store_url):
    out = sb("compare", "--baseline", "mlx-lm=0.31.3", "--candidate", "mlx-lm=0.32.2", url=store_url)
    assert out.returncode == 0, out.stderr
    assert "regression" in out.stdout and "Mann-Whitney" in out.stdout
    assert "equivalent" in out.stdout or "inconclusive" in out.stdout
    out = sb(
        "compare",
        "-b",
        "mlx-lm=0.31.3",
        "-c",
        "mlx-lm=0.32.2",
        "--format",
        "md",
        "-m",
        "decode_tps",
        "--fail-on-regression",
        url=store_url,
    )
    assert out.returncode == 1 and out.stdout.count("**regression**") == 1
    out = sb("compare", "-b", "nope=1", "-c", "mlx-lm=0.32.2", url=store_url)
    assert out.returncode == 2 and "unknown selector key" in out.stderr


def test_the_95_percent_interval_covers_the_true_ratio_about_95_percent_of_the_time():
    # Simulated processes (log-normal, 4% between-process spread, true ratio 0.95), fixed seed: the Moses
    # interval is distribution-free, so its coverage should sit near its level.
    rng = random.Random(7)
    hits = 0
    for _ in range(500):
        b = [[100 * math.exp(rng.gauss(0, 0.04))] for _ in range(15)]
        c = [[95 * math.exp(rng.gauss(0, 0.04))] for _ in range(15)]
        comp = compare_processes(b, c, "decode_tps")
        hits += comp.ci_low <= 0.95 <= comp.ci_high
    assert 0.92 <= hits / 500 <= 0.98
