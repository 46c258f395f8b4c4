"""A watch, declared once, and its checks: the spec's validation (each bad field named), the package index read
from a real --find-links folder and a real local HTTP simple index (PEP 691 JSON, PEP 503 HTML) holding two
real mlx-lm releases, new releases turned into campaigns on real PostgreSQL (first look records, a new release
makes one campaign, a repeated or concurrent look none), the baseline with history, and `siliconbench watch`
as a real subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from sqlalchemy import func, select, update

from siliconbench.contract.errors import UserError
from siliconbench.contract.watch_spec import load_watch, parse_watch

from harness.fleet import free_port
from siliconbench.coordinator.watch import package_index, watches
from siliconbench.coordinator.watch.campaigns.baselines import BASELINE_REASON, versions_with_history
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import Host, utcnow
from siliconbench.storage.watch_tables import Campaign, Watch, WatchCheck, WatchVersion
from tests.conftest import new_pg_database
from tests.history_seed import seed_results
from tests.index_support import RELEASES, SimpleIndex, folder_with, local_index
from tests.page_support import run_page

ROOT = Path(__file__).resolve().parents[2]
OLD, NEW = RELEASES
SUITE = {"name": "release", "models": ["tiny-llama-5m"], "engines": ["mlx"], "placement": "each"}


def watch(**kw) -> dict:
    return {"name": "nightly", "packages": ["mlx-lm"], "every": "6h", "suite": dict(SUITE), **kw}


@pytest.fixture(scope="session")
def index_dir(tmp_path_factory) -> Path:
    return local_index(tmp_path_factory)


def seed_hosts(url: str) -> str:
    """Two online workers offering MLX, one offline, one online offering only llama.cpp."""
    now = utcnow()
    with session_scope(url) as s:
        for name, chip, online, engines in (
            ("mini-b", "Apple M4", True, ["mlx"]),
            ("mini-a", "Apple M4", True, ["mlx"]),
            ("mini-c", "Apple M4", False, ["mlx"]),
            ("studio", "Apple M2 Ultra", True, ["llama.cpp"]),
        ):
            s.add(
                Host(
                    name=name,
                    chip=chip,
                    memory_bytes=16 << 30,
                    os="Darwin",
                    online=online,
                    last_heartbeat=now if online else now - timedelta(hours=1),
                    engines=[{"name": e, "version": "0.31.3"} for e in engines],
                )
            )
    return url


@pytest.fixture
def pg():
    """A fresh PostgreSQL database at head, with the workers of ``seed_hosts``."""
    with new_pg_database("sb_watch", migrated=True) as url:
        yield seed_hosts(url)


def beat(url: str) -> None:
    """The online workers' heartbeat, as their workers write one every few seconds (online: younger than ONLINE_S)."""
    with session_scope(url) as s:
        s.execute(update(Host).where(Host.online.is_(True)).values(last_heartbeat=utcnow()))


def add_watch(url: str, **kw) -> str:
    with session_scope(url) as s:
        return watches.add(s, parse_watch(watch(**kw)))


def rows(url: str, model, **where):
    with session_scope(url) as s:
        return s.scalars(select(model).filter_by(**where)).all()


# ------------------------------------------------------------------------------------------------ the spec


@pytest.mark.parametrize(
    "change, field, needle",
    [
        ({"packages": ["mlx-lm", "torch"]}, "packages[1]", "Valid choices: mlx-lm, mlx, llama-cpp-python"),
        ({"packages": ["mlx", "mlx"]}, "packages", "more than once"),
        ({"packages": []}, "packages", "follows nothing"),
        ({"packages": ["llama-cpp-python"]}, "packages[0]", "engine llama.cpp"),
        ({"name": "has space"}, "name", "pattern"),
        ({"every": "30s"}, "every", "at least 1 minute"),
        ({"every": 30}, "every", "a number and a unit"),
        ({"every": "often"}, "every", "a number and a unit"),
        ({"hosts": {"chip": 4}}, "hosts.chip", "valid string"),
        ({"hosts": {"cpu": "M4"}}, "hosts.cpu", "Known settings here: chip, engine, gpu, gpu_cores"),
        ({"hosts": []}, "hosts", "at least 1 item"),
        ({"hosts": "some"}, "hosts", "'all', a list of worker names, or a filter"),
        ({"notify": {"webhook": "ftp://example.com/x"}}, "notify.webhook", "http:// or https://"),
        ({"notify": {"url": "https://example.com"}}, "notify.url", "Known settings here: webhook"),
        ({"index": "ftp://example.com/simple"}, "index", "http(s) URL or a folder"),
        ({"index": "/no/such/folder"}, "index", "no folder"),
        ({"processes": 2}, "processes", "greater than or equal to 4"),
        ({"llama_cpp": {"source": "/src/llama.cpp", "commit": "b4a1c2d"}}, "llama_cpp.commit", "unknown setting"),
        ({"llama_cpp": {}}, "llama_cpp", "give one of source"),
        ({"llama_cpp": {"source": "/no/such/llama.cpp"}}, "llama_cpp.source", "no folder"),
        ({"llama_cpp": {"source": str(ROOT / "docs")}}, "llama_cpp.source", "not a llama.cpp git checkout"),
        ({"llama_cpp": {"archives": "/no/such/releases"}}, "llama_cpp.archives", "no folder"),
        ({"llama_cpp": {"archives": str(ROOT), "bisect": True}}, "llama_cpp.bisect", "follow a source checkout"),
        ({"llama_cpp": {"archives": str(ROOT), "tools": ["llama-server"]}}, "llama_cpp.tools", "llama-bench"),
        ({"llama_cpp": {"archives": str(ROOT), "tools": ["llama-cli"]}}, "llama_cpp.tools[0]", "Valid choices"),
        ({"llama_cpp": {"archives": str(ROOT), "cmake_flags": ["GGML_X=1"]}}, "llama_cpp.cmake_flags", "-DNAME=VALUE"),
        ({"packages": [], "llama_cpp": {"archives": str(ROOT)}}, "llama_cpp", "the suite's engines (mlx)"),
        ({"schedule": "6h"}, "schedule", "Known settings here: description, every, hosts, index"),
        ({"suite": {**SUITE, "engines": ["cuda"]}}, "suite.engines[0]", "Valid choices: llama.cpp, mlx"),
        ({"suite": {**SUITE, "repetitons": 3}}, "suite.repetitons", "unknown setting"),
        ({"suite": {**SUITE, "engine_versions": {"mlx": [OLD]}}}, "suite.engine_versions", "the campaign sets"),
        ({"suite": {**SUITE, "processes": 3}}, "suite.processes", "caps the processes"),
        ({"suite": ["not", "a", "sweep"]}, "suite", "must be a sweep"),
        ({"suite": "missing.yaml"}, "suite", "cannot read"),
    ],
)
def test_each_bad_field_is_named(change, field, needle):
    with pytest.raises(UserError) as e:
        parse_watch(watch(**change))
    assert e.value.field == field, str(e.value)
    assert needle in str(e.value)


def test_missing_fields_are_named():
    for key in ("name", "suite", "every"):
        with pytest.raises(UserError) as e:
            parse_watch({k: v for k, v in watch().items() if k != key})
        assert e.value.field == key and "Field required" in e.value.message


def test_a_suite_file_and_an_index_folder_are_relative_to_the_watch_file(tmp_path, index_dir):
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump({**SUITE, "hosts": ["mini-a"]}))
    (tmp_path / "watch.yaml").write_text(yaml.safe_dump(watch(suite="suite.yaml", index=str(index_dir))))
    spec = load_watch(tmp_path / "watch.yaml")
    assert spec.suite == {**SUITE, "hosts": ["mini-a"]} and spec.host_selector == ["mini-a"]  # the suite's
    assert spec.index == str(index_dir) and spec.every_s == 6 * 3600 and spec.processes == 15
    again = parse_watch(spec.stored(), check_folders=False)  # what the scheduler reads back
    assert again.stored() == spec.stored() and again.suite_spec == spec.suite_spec
    overridden = parse_watch(watch(hosts={"chip": "M4"}))  # the watch's hosts win over the suite's
    assert overridden.host_selector.chip == "M4" and overridden.stored()["hosts"] == {"chip": "M4"}


def test_the_example_watch_validates():
    spec = load_watch(ROOT / "examples/watch.yaml")
    assert spec.packages == ["mlx-lm"] and spec.notify.webhook.startswith("https://")
    assert spec.suite_spec.engines == ["mlx"] and spec.host_selector.chip == "M4"
    data = yaml.safe_load((ROOT / "examples/watch-llama-tags.yaml").read_text())
    tags = parse_watch(data, check_folders=False)  # its checkout is the user's: ~/src/llama.cpp
    assert tags.followed == ["llama.cpp"] and tags.llama_cpp.bisect and tags.llama_cpp.fetch
    # kept as written: `~` is each machine's own home, expanded where git runs (the coordinator, every worker)
    assert tags.llama_cpp.source == "~/src/llama.cpp" and tags.suite_spec.engines == ["llama.cpp"]


# --------------------------------------------------------------------------------------------- the index


def test_versions_from_a_find_links_folder(index_dir):
    assert sorted(p.name for p in index_dir.iterdir()) == [f"mlx_lm-{v}-py3-none-any.whl" for v in RELEASES]
    assert package_index.versions("mlx-lm", str(index_dir)) == [OLD, NEW]
    assert package_index.versions("MLX_LM", str(index_dir)) == [OLD, NEW]  # names are canonicalized (PEP 503)
    assert package_index.versions("mlx", str(index_dir)) == []
    assert package_index.find_links_for(str(index_dir)) == str(index_dir)
    assert package_index.index_url_for(str(index_dir)) is None
    with pytest.raises(package_index.PackageIndexError, match="no such folder"):
        package_index.versions("mlx-lm", str(index_dir / "missing"))


@pytest.mark.parametrize("json_api", [True, False], ids=["pep691-json", "pep503-html"])
def test_versions_from_a_simple_index_over_http(index_dir, json_api):
    with SimpleIndex(index_dir, json_api=json_api) as idx:
        assert package_index.versions("mlx-lm", idx.url) == [OLD, NEW]
        assert idx.requests[-1][0] == "/simple/mlx-lm/" and "application/vnd.pypi.simple.v1+json" in idx.requests[-1][1]
        assert package_index.find_links_for(idx.url) is None and package_index.index_url_for(idx.url) == idx.url
        with pytest.raises(package_index.PackageIndexError, match="has no project mlx"):
            package_index.versions("mlx", idx.url)
    yanked = f"mlx_lm-{NEW}-py3-none-any.whl"
    with SimpleIndex(index_dir, json_api=json_api, yanked={yanked}) as idx:
        assert package_index.versions("mlx-lm", idx.url) == [OLD]
        assert package_index.versions("mlx-lm", idx.url, yanked=True) == [OLD, NEW]


def test_an_unreachable_index_is_named():
    url = f"http://127.0.0.1:{free_port()}/simple"
    with pytest.raises(package_index.PackageIndexError) as e:
        package_index.versions("mlx-lm", url, timeout_s=3)
    assert url in str(e.value) and "unreachable" in str(e.value)


def test_pre_releases_and_other_files_are_left_out():
    files = [(f"mlx_lm-{v}-py3-none-any.whl", False) for v in ("0.9.0", "0.10.0rc1", "0.10.0", "0.11.0.dev1")]
    files += [
        ("mlx_lm-0.8.0.tar.gz", False),
        ("mlx-0.99.0-cp311-cp311-macosx_14_0_arm64.whl", False),
        ("README.txt", False),
        ("mlx_lm-0.12.0-py3-none-any.whl", True),
    ]
    assert package_index._select(files, "mlx-lm", pre=False, yanked=False) == ["0.8.0", "0.9.0", "0.10.0"]
    assert package_index._select(files, "mlx-lm", pre=True, yanked=True)[-3:] == ["0.10.0", "0.11.0.dev1", "0.12.0"]


# ----------------------------------------------------------------------------------- checks and campaigns


def test_first_check_records_what_is_there_without_a_campaign(pg, index_dir):
    add_watch(pg, index=str(index_dir))
    with session_scope(pg) as s:
        assert watches.check_watch(s, "nightly", checker="test") == []
    assert sorted(v.version for v in rows(pg, WatchVersion, watch="nightly")) == [OLD, NEW]
    assert all(v.campaign_id is None for v in rows(pg, WatchVersion)) and not rows(pg, Campaign)
    (check,) = rows(pg, WatchCheck)
    assert check.versions == {"mlx-lm": [OLD, NEW]} and check.new_campaigns == [] and check.error is None
    assert check.checker == "test" and check.finished_at >= check.started_at
    assert rows(pg, Watch)[0].last_checked_at == check.started_at


def test_a_new_release_becomes_one_campaign(pg, tmp_path):
    folder = folder_with([OLD], tmp_path / "index")
    add_watch(pg, index=str(folder))
    with session_scope(pg) as s:
        assert watches.check_watch(s, "nightly", checker="test") == []
    folder_with([NEW], folder)  # the next release is published
    beat(pg)
    with session_scope(pg) as s:
        (cid,) = watches.check_watch(s, "nightly", checker="test")
    (c,) = rows(pg, Campaign)
    assert (c.id, c.package, c.engine, c.baseline, c.candidate, c.status) == (
        cid,
        "mlx-lm",
        "mlx",
        OLD,
        NEW,
        "preparing",
    )
    assert c.hosts == ["mini-a", "mini-b"]  # online, offering MLX, sorted; not the offline one, not llama.cpp's
    assert "no earlier version has results" in c.verdicts[BASELINE_REASON] and c.error is None
    assert {v.version: v.campaign_id for v in rows(pg, WatchVersion)} == {OLD: None, NEW: cid}
    with session_scope(pg) as s:  # a second look finds nothing new
        assert watches.check_watch(s, "nightly", checker="test") == []
    assert len(rows(pg, Campaign)) == 1 and [c.new_campaigns for c in rows(pg, WatchCheck)] == [[], [cid], []]


def test_the_same_checks_on_sqlite_and_postgresql(empty_db):
    """An explicit SQLite URL works as well: ON CONFLICT DO NOTHING ... RETURNING in both dialects."""
    url = seed_hosts(empty_db)
    add_watch(url)
    with session_scope(url) as s:
        assert watches.check_watch(s, "nightly", checker="t", index_versions={"mlx-lm": [OLD]}) == []
        (cid,) = watches.check_watch(s, "nightly", checker="t", index_versions={"mlx-lm": [OLD, NEW]})
        assert watches.check_watch(s, "nightly", checker="t", index_versions={"mlx-lm": [OLD, NEW]}) == []
        assert [(c["id"], c["baseline"], c["candidate"], c["hosts"]) for c in watches.campaigns(s)] == [
            (cid, OLD, NEW, ["mini-a", "mini-b"])
        ]
        watches.remove(s, "nightly")
    assert not rows(url, Campaign) and not rows(url, WatchVersion) and not rows(url, WatchCheck)


def test_the_baseline_is_the_last_version_with_history(pg, models_dir):
    seed_results(pg, models_dir, [{"mlx_lm": "0.31.2", "mlx": "0.31.1", "medians": {"decode_tps": 100.0}}])
    add_watch(pg)
    with session_scope(pg) as s:
        watches.check_watch(s, "nightly", checker="test", index_versions={"mlx-lm": ["0.31.2", OLD]})
        assert versions_with_history(s, "mlx", "mlx-lm", ["0.31.2", OLD]) == {"0.31.2"}
        assert versions_with_history(s, "mlx", "mlx", ["0.31.1", "0.30.0"]) == {"0.31.1"}  # from the environment
        assert versions_with_history(s, "llama.cpp", "llama-cpp-python", ["0.31.2"]) == set()
        (cid,) = watches.check_watch(s, "nightly", checker="test", index_versions={"mlx-lm": ["0.31.2", OLD, NEW]})
    c = rows(pg, Campaign)[0]
    assert (c.baseline, c.candidate) == ("0.31.2", NEW)  # 0.31.3 is newer but was never measured
    assert "newest earlier version with ok results" in c.verdicts[BASELINE_REASON]


def test_concurrent_checks_make_one_campaign(pg, index_dir):
    add_watch(pg, index=str(index_dir))
    with session_scope(pg) as s:
        watches.check_watch(s, "nightly", checker="first", index_versions={"mlx-lm": [OLD]})
    both = {"mlx-lm": [OLD, NEW]}
    got = {}
    with session_scope(pg) as a:
        got["a"] = watches.check_watch(a, "nightly", checker="a", index_versions=both)
        # b runs while a's transaction is open: it waits on the unique rows, then finds them made
        t = threading.Thread(target=lambda: got.setdefault("b", watches.run_check(pg, "nightly", checker="b")))
        t.start()
        t.join(1.0)
        assert t.is_alive()  # blocked on a's rows, not racing past them
    t.join(30)
    assert len(got["a"]) == 1 and got["b"]["new_campaigns"] == [] and len(rows(pg, Campaign)) == 1


def test_no_live_host_makes_a_failed_campaign_saying_why(pg):
    add_watch(pg, hosts=["mini-c", "not-registered"])
    with session_scope(pg) as s:
        watches.check_watch(s, "nightly", checker="t", index_versions={"mlx-lm": [OLD]})
        watches.check_watch(s, "nightly", checker="t", index_versions={"mlx-lm": [OLD, NEW]})
    (c,) = rows(pg, Campaign)
    assert c.status == "failed" and c.hosts == [] and "no online worker offering mlx" in c.error


def test_due_follows_every_and_an_index_error_is_recorded(pg):
    add_watch(pg, every="30m", index=f"http://127.0.0.1:{free_port()}/simple")
    t0 = utcnow()
    with session_scope(pg) as s:
        assert watches.due(s, t0) == ["nightly"]  # never checked
        assert watches.check_watch(s, "nightly", checker="t") == []
        assert watches.due(s, t0 + timedelta(minutes=29)) == []
        assert watches.due(s, t0 + timedelta(minutes=31)) == ["nightly"]
    (check,) = rows(pg, WatchCheck)
    assert "unreachable" in check.error and check.versions == {}


# ----------------------------------------------------------------------------------------- the command


def sb(*args, url: str | None, **env):
    base = {k: v for k, v in os.environ.items() if k != "SILICONBENCH_DATABASE_URL"}
    return subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", "watch", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**base, **({"SILICONBENCH_DATABASE_URL": url} if url else {}), **env},
        timeout=120,
    )


def test_watch_add_list_run_now_remove(pg, tmp_path, index_dir):
    folder = folder_with([OLD], tmp_path / "index")
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(watch(index="index")))  # relative to the file
    out = sb("add", str(path), url=pg)
    assert out.returncode == 0 and "added watch nightly" in out.stdout, out.stderr
    assert sb("add", str(path), url=pg).stdout.startswith("unchanged")
    path.write_text(yaml.safe_dump(watch(index="index", every="1d")))
    refused = sb("add", str(path), url=pg)
    assert refused.returncode == 2 and "--replace" in refused.stderr and "Nothing was run" in refused.stderr
    assert rows(pg, Watch)[0].spec["every"] == "6h"
    assert sb("add", str(path), "--replace", url=pg).stdout.startswith("replaced")

    listed = sb("list", url=pg)
    assert listed.returncode == 0 and "nightly" in listed.stdout and "never" in listed.stdout, listed.stderr
    out = sb("run-now", "nightly", url=pg)
    assert out.returncode == 0 and f"mlx-lm: {OLD}" in out.stdout and "no new campaign" in out.stdout, out.stderr
    folder_with([NEW], folder)
    beat(pg)
    out = sb("run-now", "nightly", url=pg)
    assert out.returncode == 0 and f"new campaign 1: mlx-lm {OLD} → {NEW} on mini-a, mini-b (preparing)" in out.stdout
    (row,) = json.loads(sb("list", "--format", "json", url=pg).stdout)
    assert (row["every"], row["campaigns"], row["index"]) == ("1d", 1, str(folder)) and row["last_checked_at"]
    checks = rows(pg, WatchCheck)
    assert len(checks) == 2 and checks[0].checker.startswith("cli ") and " pid " in checks[0].checker

    out = sb("remove", "nightly", url=pg)
    assert out.returncode == 0 and not rows(pg, Watch) and not rows(pg, Campaign) and not rows(pg, WatchVersion)
    gone = sb("remove", "nightly", url=pg)
    assert gone.returncode == 2 and "NAME" in gone.stderr and "no watch named 'nightly'" in gone.stderr


def test_watch_bad_input_exits_2_and_writes_nothing(pg, tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(watch(hosts={"chip": "M4", "ram": 16})))
    out = sb("add", str(path), url=pg)
    assert out.returncode == 2 and "hosts.ram" in out.stderr and "Known settings here" in out.stderr
    assert not rows(pg, Watch)
    assert sb("add", str(tmp_path / "none.yaml"), url=pg).returncode == 2
    path.write_text(yaml.safe_dump(watch()))
    no_db = sb("add", str(path), url=None, XDG_DATA_HOME=str(tmp_path / "xdg"))
    assert no_db.returncode == 2 and "SILICONBENCH_DATABASE_URL" in no_db.stderr
    assert sb("run-now", "nope", url=pg).returncode == 2
    assert sb("list", "--format", "csv", url=pg).returncode == 2


def test_run_now_with_an_unreachable_index_exits_1_and_records_the_check(pg, tmp_path):
    add_watch(pg, index=f"http://127.0.0.1:{free_port()}/simple")
    out = sb("run-now", "nightly", url=pg)
    assert out.returncode == 1 and "unreachable" in out.stdout
    assert rows(pg, WatchCheck)[0].error and rows(pg, Watch)[0].last_checked_at is not None


# --------------------------------------------------------------------------------------------- dashboard


def test_verdict_summary_reads_the_campaign_drivers_verdicts():
    assert watches.verdict_summary({BASELINE_REASON: "mlx-lm 0.31.3: ..."}) == "no verdict yet"
    assert watches.verdict_summary({BASELINE_REASON: "...", "phase": "looks"}) == "phase: looks"
    v = {
        "series": {
            "a": {"decode_tps": {"verdict": "equivalent"}, "ttft_ms": {"verdict": "regression"}},
            "b": {"decode_tps": {"verdict": "equivalent"}},
        },
        "suspects": ["x", "y"],
        "phase": "done",
    }
    assert watches.verdict_summary(v) == "2 equivalent, 1 regression; 2 suspect hosts"


def test_regressions_page_shows_watches_and_campaigns(pg, tmp_path, monkeypatch):
    add_watch(pg)
    with session_scope(pg) as s:
        watches.check_watch(s, "nightly", checker="t", index_versions={"mlx-lm": [OLD]})
    beat(pg)
    with session_scope(pg) as s:
        (cid,) = watches.check_watch(s, "nightly", checker="t", index_versions={"mlx-lm": [OLD, NEW]})
        c = s.get(Campaign, cid)
        c.verdicts = {
            **c.verdicts,
            "phase": "done",
            "suspects": ["mini-b"],
            "series": {  # the campaign driver's
                "tiny p64 g16": {"decode_tps": {"verdict": "regression"}, "prefill_tps": {"verdict": "equivalent"}}
            },
        }
    at = run_page("regressions", pg, monkeypatch, tmp_path)
    w = next(d.value for d in at.dataframe if "last checked" in d.value.columns)
    assert list(w["watch"]) == ["nightly"] and list(w["campaigns"]) == [1]
    c = next(d.value for d in at.dataframe if "versions" in d.value.columns)
    assert list(c["versions"]) == [f"mlx-lm {OLD} → {NEW}"] and list(c["hosts"]) == ["mini-a, mini-b"]
    assert list(c["verdicts"]) == ["1 regression, 1 equivalent; 1 suspect host"] and "no earlier" in c["baseline"][0]
    with session_scope(pg) as s:
        assert s.scalar(select(func.count()).select_from(Campaign)) == 1
