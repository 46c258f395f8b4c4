"""The dashboard's pages under Streamlit's AppTest, against seeded SQLite and PostgreSQL databases, and the
SQL aggregates behind them checked against siliconbench.contract.aggregate.summarize on the same samples.

The Sweeps page's form runs a real sweep in-process (no broker) on the session's tiny model.
"""

from __future__ import annotations

import json
import random
import time
from collections import defaultdict

import pytest
import streamlit as st
from sqlalchemy import func, select
from streamlit.testing.v1 import AppTest

from siliconbench.contract.aggregate import summarize
from siliconbench.contract.metrics import RESULT_ROW_METRICS
from siliconbench.contract.spec import SweepSpec
from siliconbench.contract.watch_spec import parse_watch

from harness.bisection_sim import Scenario, drive, levels
from siliconbench.coordinator.bisection import record
from siliconbench.coordinator.reads import queries
from siliconbench.dashboard import runner
from siliconbench.storage import database as db, result_store, sweep_store
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import Job, Result, ResultSummary, Sweep
from siliconbench.storage.watch_tables import Campaign, Watch
from tests.dashboard.support import app, chart_data, table
from tests.dashboard_seed import HOSTS, MODEL, job, prefill_values, result, seed_results
from tests.storage.records import expected_summaries

# ----------------------------------------------------------------------------------------------- fixtures


def count(url: str, model) -> int:
    with db.session_scope(url) as s:
        return s.scalar(select(func.count()).select_from(model))


# ------------------------------------------------------------------------------- SQL equals summarize


def test_sql_aggregates_equal_summarize(seeded):
    """A series pools its results' summaries: count, mean, min, max and the variance exactly as summarize over
    the pooled samples; the median is the median of the results' medians (siliconbench.coordinator.reads.compare_series' definition:
    the exact median when a series has one result)."""
    metrics = queries.SAMPLE_METRICS + RESULT_ROW_METRICS + ("mlx_peak_memory_bytes",)
    with db.session_scope(seeded["url"]) as s:
        rows, total = queries.series(s, metrics=metrics)
        stored = result_store.load_stored(s)
    pooled: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    medians: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for x in stored:
        if x.result.status != "ok":
            continue
        k = x.result.identity_hash(x.job)
        for m in metrics:
            values = x.result.measured(m) if m not in RESULT_ROW_METRICS else [getattr(x.result, m)]
            pooled[k][m] += values
            if values and m not in RESULT_ROW_METRICS:
                medians[k][m].append(summarize(values).median)
    assert total == len(rows) == len(pooled) == 7
    checked = 0
    for r in rows:
        for m in metrics:
            want = summarize(pooled[r["identity_hash"]][m])
            got = r["metrics"].get(m)
            if want is None:
                assert got is None
                continue
            median = want.median if m in RESULT_ROW_METRICS else summarize(medians[r["identity_hash"]][m]).median
            assert got["median"] == pytest.approx(median, rel=1e-9, abs=1e-9), (r["identity_hash"], m)
            for f in ("mean", "stddev", "min", "max"):
                assert got[f] == pytest.approx(getattr(want, f), rel=1e-9, abs=1e-9), (r["identity_hash"], m, f)
            assert got["count"] == want.count
            checked += 1
    assert checked > 30
    # Pooled: one identity measured in two sweeps has both runs' samples; the other host's is its own.
    studio = [
        r for r in rows if (r["hostname"], r["engine"], r["n_prompt"]) == ("mac-studio-01.local", "llama.cpp", 512)
    ]
    assert len(studio) == 1 and studio[0]["n_results"] == 2 and studio[0]["metrics"]["prefill_tps"]["count"] == 6
    # 5 GiB values one byte apart: the two-pass variance keeps them exact.
    mlx = next(r for r in rows if r["engine"] == "mlx" and r["hostname"] == "mbp-m4.local")
    assert mlx["metrics"]["mlx_peak_memory_bytes"]["stddev"] == pytest.approx(1.0, rel=1e-9)


def test_stored_summaries_equal_summarize_per_result(seeded):
    """The summaries save_result wrote beside the samples are summarize's, per result and metric."""
    with db.session_scope(seeded["url"]) as s:
        stored = {(r.job_id, r.metric): r for r in s.scalars(select(ResultSummary))}
        results = result_store.load_stored(s)
    want = expected_summaries(results)
    assert set(stored) == set(want) and len(want) > 30
    for key, w in want.items():
        got = stored[key]
        assert (got.n, got.median, got.min, got.max) == (w.count, w.median, w.min, w.max), key
        assert got.mean == pytest.approx(w.mean, rel=1e-12) and got.var == pytest.approx(w.stddev**2, rel=1e-12)


def test_series_median_of_several_results_is_the_median_of_their_medians(url):
    """Three results of one identity whose pooled median (2.0) differs from the median of medians (10.0)."""
    seed_results(url, [[1.0, 2.0, 3.0], [10.0, 11.0, 12.0], [0.0, 0.5, 100.0]])
    with db.session_scope(url) as s:
        (row,), _ = queries.series(s, metrics=("prefill_tps",))
    got = row["metrics"]["prefill_tps"]
    pooled = summarize([1.0, 2.0, 3.0, 10.0, 11.0, 12.0, 0.0, 0.5, 100.0])
    assert got["median"] == summarize([2.0, 11.0, 0.5]).median == 2.0 != pooled.median
    assert got["mean"] == pytest.approx(pooled.mean) and got["stddev"] == pytest.approx(pooled.stddev)
    assert (got["min"], got["max"], got["count"]) == (0.0, 100.0, 9)


def test_series_limit_reports_the_total(seeded):
    with db.session_scope(seeded["url"]) as s:
        rows, total = queries.series(s, limit=2)
    assert len(rows) == 2 and total == 7


# ------------------------------------------------------------------------------------------------ pages


def test_compare_page_latest_sweep_by_default(seeded):
    at = app()
    assert at.title[0].value == "Compare"
    assert at.sidebar.multiselect(key="f_sweeps").value == ["laptop-mbp"]
    t = table(at, "compare_table")
    assert len(t) == 3 and set(t["engine"]) == {"llama.cpp 0.3.35", "mlx 0.32.2"}
    want = prefill_values("llama.cpp", "mbp", 128, 0)
    row = t[t["configuration"].str.contains("p128") & (t["engine"] == "llama.cpp 0.3.35")].iloc[0]
    assert row["prompt tok/s"] == f"{sum(want) / 3:,.1f} ± 10.0" and row["samples"] == 3 and row["results"] == 1
    assert row["memory peak"] == "800 ± 0 MiB" and row["detail"].startswith("/result?job=")
    ratios = table(at, "ratio_table")
    assert len(ratios) == 1 and ratios.iloc[0]["prompt tok/s ×"] == pytest.approx(2.0, rel=0.01)
    charts = at.get("vega_lite_chart")
    assert len(charts) == 3  # bars, distribution, scaling
    assert len(chart_data(charts[0])) == 3  # one bar per series
    assert len(chart_data(charts[1])) == 9  # every raw measured sample of the three series
    failed = table(at, "failed_table")
    assert list(failed["error"]) == ["engine error: out of memory while loading"]


def test_compare_page_keeps_identities_apart(seeded):
    at = app()
    at.sidebar.multiselect(key="f_sweeps").set_value([]).run()
    t = table(at, "compare_table")
    assert len(t) == 7  # 4 identities on the studio (each pooled over 2 sweeps), 3 on the laptop
    p512 = t[t["configuration"].str.contains("p512") & t["engine"].str.startswith("llama.cpp")]
    assert sorted(p512["results"]) == [1, 2]  # two versions on two hosts: never one series
    assert len(table(at, "ratio_table")) == 3
    at.sidebar.multiselect(key="f_engine_versions").set_value(["0.3.35"]).run()
    assert list(table(at, "compare_table")["engine"]) == ["llama.cpp 0.3.35"] * 2
    at.radio(key="metric").set_value("decode_tps").run()
    assert not at.exception and len(at.get("vega_lite_chart")) == 3


def test_compare_page_on_an_empty_database(url):
    at = app()
    assert "No results yet" in at.info[0].value


def test_compare_and_regressions_say_what_they_leave_out_and_why(url):
    """A quickstart on a busy laptop: the MLX job ran contended. Compare shows llama.cpp alone and says, beside the
    control that shows it, that one disturbed result was left out and why; ticked, it is there and said so."""
    sid = "quick-mbp"
    jobs = [job(sid, i, e, 128) for i, e in enumerate(("llama.cpp", "mlx"))]
    with session_scope(url) as s:
        sweep_store.create_sweep(s, sid, SweepSpec(name="quick", models=[MODEL], repetitions=3), jobs)
    for j in jobs:
        r = result(j, "mbp", 0)
        r.extra["busy"] = {"mode": "wait", "contended": j.engine == "mlx", "why": ["other processes used 60%"]}
        with session_scope(url) as s:
            result_store.save_result(s, j, r, host=HOSTS["mbp"][0], worker="mbp")
    at = app()
    assert list(table(at, "compare_table")["engine"]) == ["llama.cpp 0.3.35"]
    said = " ".join(c.value for c in at.sidebar.caption)
    assert "1 disturbed result left out (1 contended" in said and "Include disturbed results" in said
    assert "1 disturbed result left out" in " ".join(c.value for c in at.caption)
    at.sidebar.checkbox(key="f_disturbed").check().run()
    assert sorted(table(at, "compare_table")["engine"]) == ["llama.cpp 0.3.35", "mlx 0.32.2"]
    assert "Includes 1 disturbed result (1 contended)" in " ".join(c.value for c in at.sidebar.caption)
    at = app("regressions")
    assert any("1 disturbed result left out (1 contended" in c.value for c in at.caption)


def test_sweeps_page_lists_sweeps_with_progress(seeded):
    at = app("sweeps")
    t = table(at, "sweep_table")
    assert list(t["sweep"]) == ["laptop-mbp", "again-studio", "first-studio"]
    assert set(t["status"]) == {"done"} and list(t["progress"]) == [1.0, 1.0, 1.0]
    assert list(t["failed"]) == [1, 0, 0]


def test_fleet_page_shows_hosts_from_heartbeats(seeded):
    t = table(app("fleet"), "hosts_table").set_index("worker")
    assert t.loc["studio", "status"].endswith("online") and t.loc["mbp", "status"].endswith("offline")
    assert t.loc["studio", "chip"] == "Apple M2 Ultra" and t.loc["studio", "memory GiB"] == 192
    assert t.loc["studio", "engines"] == "llama.cpp 0.3.36, mlx 0.32.2"
    assert t.loc["mbp", "models"].split(" (")[0] == MODEL  # each model with the forms the host holds
    assert (t.loc["studio", "jobs done"], t.loc["mbp", "jobs done"], t.loc["mbp", "jobs failed"]) == (8, 3, 1)


def test_fleet_page_at_fleet_size_summarises_by_sku_and_state_and_pages_the_hosts(url):
    """120 hosts of two SKUs, some running a job, some silent: one line per SKU with its states, then 50 hosts a
    page, filtered by state or SKU."""
    from datetime import timedelta

    from siliconbench.storage.tables import Host, utcnow

    now = utcnow()
    with db.session_scope(url) as s:
        for i in range(120):
            m4 = i % 3 != 0  # 80 M4 Pro minis, 40 M2 minis
            s.add(
                Host(
                    name=f"mini-{i:03d}", hostname=f"mini-{i:03d}.local", chip="Apple M4 Pro" if m4 else "Apple M2",
                    memory_bytes=(64 if m4 else 16) * 2**30, os="macOS 15.5", info={}, engines=[], models=[],
                    online=True, last_heartbeat=now - timedelta(seconds=600 if i % 10 == 9 else 1),
                    current_job_id="a" * 16 if i % 4 == 0 else None,
                )
            )  # fmt: skip
    at = app("fleet")
    summary = table(at, "fleet_summary").set_index("sku")
    assert summary["busy"].sum() + summary["online"].sum() + summary["offline"].sum() == 120
    m4 = next(k for k in summary.index if k.startswith("Apple M4 Pro"))
    assert tuple(summary.loc[m4, ["online", "busy", "offline"]]) == (52, 20, 8)
    assert any("108 of 120 online (30 running a job" in c.value for c in at.caption)
    hosts = table(at, "hosts_table")
    assert len(hosts) == 50 and list(hosts["worker"])[:2] == ["mini-000", "mini-001"]
    at.number_input(key="fleet_page").set_value(3).run()
    assert list(table(at, "hosts_table")["worker"]) == [f"mini-{i:03d}" for i in range(100, 120)]
    at.number_input(key="fleet_page").set_value(1)
    at.selectbox(key="fleet_state").set_value("offline").run()
    offline = table(at, "hosts_table")
    assert len(offline) == 12 and set(offline["status"]) == {"offline"}
    at.selectbox(key="fleet_state").set_value("all")
    at.selectbox(key="fleet_sku").set_value(m4).run()
    assert len(table(at, "hosts_table")) == 50 and set(table(at, "hosts_table")["chip"]) == {"Apple M4 Pro"}


def test_fleet_page_without_workers(url):
    assert "No worker has registered" in app("fleet").info[0].value


def test_result_page_shows_a_failed_job(seeded):
    at = app("result", job=seeded["failed_job"])
    assert "out of memory while loading" in at.error[0].value
    assert "error: out of memory" in at.code[0].value
    assert "This job recorded no samples." in at.info[0].value


def test_result_page_shows_samples_environment_and_options(seeded):
    with db.session_scope(seeded["url"]) as s:
        job_id = s.scalar(
            select(Job.id).where(Job.sweep_id == "first-studio", Job.engine == "mlx", Job.n_prompt == 128)
        )
    at = app("result", job=job_id)
    samples = table(at, "samples_table")
    assert list(samples["repetition"]) == [0, 1, 2, 3] and list(samples["warmup"]) == [True, False, False, False]
    assert list(samples["prefill_tps"][1:]) == pytest.approx(prefill_values("mlx", "studio", 128, 0))
    summary = table(at, "summary_table").set_index("metric")
    assert summary.loc["prefill_tps", "n"] == 3 and summary.loc["prefill_tps", "unit"] == "tokens/s"
    envs = [json.loads(j.value) for j in at.json]
    assert any(e.get("chip") == "Apple M2 Ultra" for e in envs) and any("job" in e for e in envs)
    assert not at.error


# ------------------------------------------------------------------------------------------ sweep form


def fill_form(at: AppTest, **values) -> AppTest:
    for key, v in values.items():
        widget = (
            at.multiselect(key=key)
            if isinstance(v, list)
            else at.number_input(key=key)
            if isinstance(v, int)
            else at.text_input(key=key)
        )
        widget.set_value(v)
    return at


def wait_for_runner(timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while runner.active() is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert runner.active() is None, "the embedded sweep did not finish"


def test_form_previews_then_runs_the_sweep_in_process(url):
    at = app("sweeps")
    fill_form(
        at,
        sw_name="form-run",
        sw_models=[MODEL],
        sw_engines=["llama.cpp", "mlx"],
        sw_quants=["full"],
        sw_prompt_tokens="16",
        sw_gen_tokens="4",
        sw_depth="0",
        sw_reps=2,
        sw_warmup=1,
    )
    at.button(key="FormSubmitter:sweep_form-Preview").click().run()
    assert not at.exception and not at.error
    assert [m.value for m in at.metric][:2] == ["2", "1"]
    # level full on Linux: one weight dtype for both engines, GGUF F32 with MLX f32
    assert list(table(at, "preview_jobs")["job"]) == [f"llama.cpp {MODEL} F32 p16 g4 d0", f"mlx {MODEL} f32 p16 g4 d0"]
    assert count(url, Job) == 0  # a preview enqueues nothing

    at.button(key="sw_submit").click().run()
    assert not at.exception and "submitted: 2 jobs" in at.success[0].value
    wait_for_runner()
    with db.session_scope(url) as s:
        (sweep,) = s.scalars(select(Sweep)).all()
        jobs = s.execute(
            select(Job.engine, Job.status, Job.n_prompt, Job.n_gen, Job.repetitions).order_by(Job.idx)
        ).all()
        assert sweep.name == "form-run" and sweep.status == "done"
    assert jobs == [("llama.cpp", "ok", 16, 4, 2), ("mlx", "ok", 16, 4, 2)]
    assert count(url, Result) == 2

    # Previewed again, the same sweep is estimated from the results just stored.
    at.button(key="FormSubmitter:sweep_form-Preview").click().run()
    assert at.metric[2].value.endswith(" s")

    st.cache_data.clear()
    compare = app()
    t = table(compare, "compare_table")
    assert sorted(e.split()[0] for e in t["engine"]) == ["llama.cpp", "mlx"] and set(t["samples"]) == {2}
    assert len(table(compare, "ratio_table")) == 1


def test_cancel_stops_an_embedded_sweep_after_its_running_job(url):
    at = app("sweeps")
    fill_form(at, sw_name="cancel-me", sw_prompt_tokens="16, 24, 32", sw_gen_tokens="4", sw_reps=2)
    at.button(key="FormSubmitter:sweep_form-Preview").click().run()
    at.button(key="sw_submit").click().run()
    assert list(table(at, "sweep_table")["sweep"])[0].startswith("cancel-me")
    at.button(key="sw_cancel").click().run()
    wait_for_runner()
    with db.session_scope(url) as s:
        statuses = list(s.scalars(select(Job.status)))
        assert s.scalar(select(Sweep.status)) == "cancelled"
    assert len(statuses) == 6 and set(statuses) <= {"ok", "cancelled"} and "cancelled" in statuses
    assert count(url, Result) == statuses.count("ok")


def error_below(at: AppTest, key: str) -> str | None:
    """The text of the error shown directly after the widget ``key`` in its container, if any."""

    def walk(block):
        kids = list(block.children.values())
        for i, k in enumerate(kids):
            if getattr(k, "key", None) == key:
                nxt = kids[i + 1] if i + 1 < len(kids) else None
                return nxt.value if nxt is not None and nxt.type == "error" else None
            found = walk(k) if hasattr(k, "children") else None
            if found is not None:
                return found
        return None

    return walk(at.main)


@pytest.mark.parametrize(
    "edit, key, needle",
    [
        ({"sw_name": "has spaces"}, "sw_name", "name"),
        ({"sw_prompt_tokens": "16, abc"}, "sw_prompt_tokens", "'abc' is not a whole number"),
        ({"sw_gen_tokens": "-4"}, "sw_gen_tokens", "greater than 0"),
        ({"sw_depth": "9000"}, "sw_prompt_tokens", "exceeds model"),
        ({"sw_engines": []}, "sw_engines", "engines"),
    ],
)
def test_bad_form_shows_the_error_at_the_field_and_creates_nothing(url, edit, key, needle):
    at = app("sweeps")
    fill_form(at, **{"sw_prompt_tokens": "16", "sw_gen_tokens": "4", "sw_reps": 2, **edit})
    at.button(key="FormSubmitter:sweep_form-Preview").click().run()
    assert not at.exception
    msg = error_below(at, key)
    assert msg is not None and needle in msg, [e.value for e in at.error]
    assert len(at.error) == 1 and not at.get("metric")  # no preview, so no way to enqueue
    assert count(url, Sweep) == count(url, Job) == 0


def test_bad_yaml_shows_its_field_and_creates_nothing(url):
    at = app("sweeps")
    at.text_area(key="sw_yaml").set_value(f"name: y\nmodels: [{MODEL}]\nengines: [llama.cpp, onnx]\n")
    at.button(key="sw_preview_yaml").click().run()
    msg = error_below(at, "sw_upload")
    assert msg is not None and "engines[1]" in msg and "llama.cpp, mlx" in msg
    assert count(url, Job) == 0


def test_pasted_yaml_previews(url):
    at = app("sweeps")
    at.text_area(key="sw_yaml").set_value(
        f"name: y\nmodels: [{MODEL}]\nworkloads: [{{kind: generate, "
        "prompt_tokens: [16, 32], gen_tokens: [4]}]\nrepetitions: 2\n"
    )
    at.button(key="sw_preview_yaml").click().run()
    assert not at.error and at.metric[0].value == "4" and count(url, Job) == 0


# ------------------------------------------------------------------------------------------ fleet mode


@pytest.fixture
def broker(monkeypatch):
    """A private Redis (started and stopped by its PID) as SILICONBENCH_BROKER_URL: the Sweeps page's fleet mode."""
    from harness.fleet import RedisServer

    redis = RedisServer().start()
    monkeypatch.setenv("SILICONBENCH_BROKER_URL", redis.url)
    yield redis.url
    redis.stop()


def register(url: str, name: str, engines: dict[str, str], manifest: dict) -> None:
    """A hosts row as a worker's registration writes it, heartbeat now."""
    from siliconbench.storage.tables import Host, utcnow

    with db.session_scope(url) as s:
        s.add(
            Host(
                name=name,
                hostname=f"{name}.local",
                chip="Apple M4 Pro",
                memory_bytes=64 * 2**30,
                os="Darwin",
                info={},
                engines=[{"name": e, "version": v} for e, v in engines.items()],
                models=[manifest],
                online=True,
                last_heartbeat=utcnow(),
                current_job_id=None,
            )
        )


def test_fleet_mode_previews_placement_submits_and_cancels(url, models_dir, broker):
    from siliconbench.contract.queues import host_queue

    from siliconbench.storage.broker import waiting_job_ids

    manifest = json.loads((models_dir / MODEL / "manifest.json").read_text())
    register(url, "studio", {"llama.cpp": "0.3.36", "mlx": "0.32.2"}, manifest)
    register(url, "mbp", {"llama.cpp": "0.3.36"}, manifest)
    at = app("sweeps")
    assert "Fleet mode" in at.caption[0].value
    fill_form(at, sw_name="fleet", sw_prompt_tokens="16", sw_gen_tokens="4", sw_reps=2, sw_hosts=["mbp"])
    at.button(key="FormSubmitter:sweep_form-Preview").click().run()
    assert any("Fits nowhere" in e.value and "mbp has no mlx installed" in e.value for e in at.error)
    assert at.button(key="sw_submit").disabled and count(url, Job) == 0  # nothing enqueued until fixed

    fill_form(at, sw_hosts=[])
    at.radio(key="sw_placement").set_value("each")
    at.button(key="FormSubmitter:sweep_form-Preview").click().run()
    assert not at.error
    jobs = table(at, "preview_jobs")
    assert sorted(zip(jobs["job"].str.split().str[0], jobs["host"], strict=True)) == [
        ("llama.cpp", "mbp"),
        ("llama.cpp", "studio"),
        ("mlx", "studio"),
    ]
    hosts = table(at, "preview_hosts")
    assert dict(zip(hosts["host / queue"], hosts["jobs"], strict=True)) == {
        host_queue("mbp"): 1,
        host_queue("studio"): 2,
    }

    at.button(key="sw_submit").click().run()
    assert "submitted: 3 jobs" in at.success[0].value
    with db.session_scope(url) as s:
        rows = s.execute(select(Job.id, Job.target_host, Job.status)).all()
    assert sorted((h, st_) for _, h, st_ in rows) == [("mbp", "queued"), ("studio", "queued"), ("studio", "queued")]
    assert waiting_job_ids(broker, [host_queue("mbp"), host_queue("studio")]) == {r[0] for r in rows}

    assert list(table(at, "sweep_table")["status"]) == ["queued"]
    at.button(key="sw_cancel").click().run()
    with db.session_scope(url) as s:
        assert set(s.scalars(select(Job.status))) == {"cancelled"}
        assert s.scalar(select(Sweep.status)) == "cancelled"
    assert not waiting_job_ids(broker, [host_queue("mbp"), host_queue("studio")])  # their messages purged


def test_cli_dashboard_serves_on_loopback_headless():
    from siliconbench.cli.dashboard import streamlit_argv

    argv = streamlit_argv("127.0.0.1", 8501)
    assert argv[1:4] == ["-m", "streamlit", "run"] and argv[4].endswith("siliconbench/dashboard/serve.py")
    opts = dict(zip(argv[5::2], argv[6::2], strict=True))
    assert opts["--server.address"] == "127.0.0.1" and opts["--server.port"] == "8501"
    assert opts["--server.headless"] == "true" and opts["--browser.gatherUsageStats"] == "false"


def test_alike_identities_get_separate_labels_and_lines():
    from siliconbench.dashboard import tables

    def row(ident, **kw):
        base = dict(
            identity_hash=ident,
            engine="mlx",
            engine_version="0.32.2",
            model=MODEL,
            quant_level="full",
            n_prompt=16,
            n_gen=4,
            n_depth=0,
            hostname="h",
        )
        return base | kw

    rows = tables.label_series([row("aaaaaa01"), row("bbbbbb02"), row("cccccc03", n_depth=512)])
    # Same configuration, same engine version, different identities (an OS update, other options): apart.
    assert [r["series"] for r in rows[:2]] == ["mlx 0.32.2 #aaaaaa", "mlx 0.32.2 #bbbbbb"]
    lines = [r["line"] for r in tables.with_lines(rows, "n_prompt")]
    assert len(set(lines)) == 3  # another depth is another line, never joined across prompt lengths


PLANTED = [
    {"sha": "2" * 40, "number": 2, "subject": "io: a comment"},
    {"sha": "3" * 40, "number": 3, "subject": "ggml-cpu: planted slowdown"},
    {"sha": "4" * 40, "number": 4, "subject": "docs: after it"},
]


def _planted_bisection(s, *, runner: str, host: str, campaign_id: int | None = None):
    """A bisection of the planted slowdown as the search keeps it: the real state machine run to its end on
    simulated processes (harness.bisection_sim), stored as either driver stores it."""
    b = record.begin(
        s,
        source="/src/llama.cpp",
        good={"sha": "1" * 40, "number": 1, "subject": "base", "label": "b1"},
        bad={**PLANTED[-1], "label": "b4"},
        commits=PLANTED,
        metric="decode_tps",
        min_effect=0.03,
        suite={},
        host=host,
        runner=runner,
        labels={"-1": "b1", "0": "b2", "1": "b3", "2": "b4"},
        campaign_id=campaign_id,
        finding_id=7 if campaign_id else None,
    )
    search = drive(record.search_of(b), Scenario(levels(3, {1: 0.3}), 0.01), random.Random(1))
    record.keep(b, search)
    return b


def test_regressions_page_draws_a_bisection_as_a_timeline_of_commits(url):
    """A bisection this machine ran (`regressions bisect`, kept in the bisections table) is drawn commit by
    commit: each one's ratio to the good end, its interval and verdict, the first bad commit named under it with
    the confirmation's effect and the search's reason."""
    with session_scope(url) as s:
        b = _planted_bisection(s, runner="local", host="this-mac")
        first = b.first_bad
    at = app("regressions")
    assert not at.exception, at.exception
    timeline = next(c for c in at.get("vega_lite_chart") if "good end" in json.dumps(chart_data(c)))
    rows = chart_data(timeline)
    assert [r["verdict"] for r in rows] == ["good end", "good", "first bad", "bad end"]
    assert [r["build"] for r in rows] == [1, 2, 3, 4]
    assert rows[2]["ci_high"] < 1.0 and rows[2]["commit"] == "3" * 12
    said = " ".join(m.value for m in at.markdown)
    assert f"`{first['sha']}` (b3)" in said and "ggml-cpu: planted slowdown" in said and "re-measured" in said


def test_regressions_page_draws_a_fleet_bisection_beside_this_hosts(url):
    """A bisection the watch ran on the fleet (a row of ``bisections``, here holding the planted slowdown's
    steps) is listed with the host it ran on and drawn as the same timeline."""
    with session_scope(url) as s:
        spec = {
            "name": "llama-tags",
            "every": "6h",
            "llama_cpp": {"source": "/src/llama.cpp"},
            "suite": {"name": "tags", "models": [MODEL], "engines": ["llama.cpp"]},
        }
        s.add(Watch(name="llama-tags", spec=parse_watch(spec, check_folders=False).stored()))
        s.flush()
        c = Campaign(watch="llama-tags", package="llama.cpp", engine="llama.cpp", baseline="b1", candidate="b4")
        c.hosts, c.sweep_ids, c.verdicts, c.status = ["mini-1"], [], {}, "done"
        s.add(c)
        s.flush()
        b = _planted_bisection(s, runner="fleet", host="mini-1", campaign_id=c.id)
        c.verdicts = {"bisection": {"id": b.id}}
        first = b.first_bad
    at = app("regressions")
    assert not at.exception, at.exception
    (pick,) = [b for b in at.selectbox if b.key == "rg_bisection"]
    assert len(pick.options) == 1 and "b1 → b4 · found · on mini-1" in pick.options[0], pick.options
    campaigns = next(d.value for d in at.dataframe if "bisection" in d.value.columns)
    assert list(campaigns["bisection"]) == [f"bisection {b.id}"]  # the campaign names the bisection it started
    timeline = next(c for c in at.get("vega_lite_chart") if "good end" in json.dumps(chart_data(c)))
    assert [r["verdict"] for r in chart_data(timeline)] == ["good end", "good", "first bad", "bad end"]
    said = " ".join(m.value for m in at.markdown)
    assert f"`{first['sha']}` (b3)" in said
