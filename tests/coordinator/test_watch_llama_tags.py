"""A watch on llama.cpp's release tags, on a real llama.cpp history (harness/llama_repo.py): its remote (a bare clone,
standing for github.com/ggml-org/llama.cpp) gains tags, the Mac's checkout fetches them; the newest new tag becomes
one campaign on real PostgreSQL and its prepare task on real Redis carries the build (checkout, tag, options);
an unreachable remote is the check's error while the checkout's own tags are still read; a folder of release
archives; the commits a bisection would search; bad payloads refused by field."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sqlalchemy import select, update

from siliconbench.contract.watch_spec import LLAMA_CPP, parse_watch, version_key

from harness.llama_repo import SUBJECTS, make_repo, shas
from siliconbench.coordinator.watch import llama_tags, watches
from siliconbench.coordinator.watch.campaigns.state import advance
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import Host, utcnow
from siliconbench.storage.watch_tables import Campaign, WatchCheck, WatchVersion
from siliconbench.worker.runtime.prepare_env import check_payload, checkout_of
from tests.conftest import new_pg_database
from tests.fleet.support import prepare_tasks as sent

SUITE = {"name": "tags", "models": ["tiny-llama-5m"], "engines": ["llama.cpp"], "placement": "each"}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def history() -> Path:
    return make_repo()


@pytest.fixture
def remote_and_checkout(history, tmp_path) -> tuple[Path, Path]:
    """llama.cpp's remote with only b1 tagged, and a Mac's clone of it."""
    remote, mac = tmp_path / "remote.git", tmp_path / "llama.cpp"
    git("clone", "--quiet", "--bare", str(history), str(remote))
    git("-C", str(remote), "tag", "-d", "b4")
    git("clone", "--quiet", str(remote), str(mac))
    return remote, mac


@pytest.fixture
def pg():
    """A database at head with one online worker offering llama.cpp and one offering only MLX."""
    with new_pg_database("sb_tags", migrated=True) as url:
        with session_scope(url) as s:
            for name, engine in (("studio", "llama.cpp"), ("mini", "mlx")):
                s.add(
                    Host(
                        name=name,
                        chip="Apple M4",
                        memory_bytes=16 * 2**30,
                        os="macOS 15",
                        online=True,
                        last_heartbeat=utcnow(),
                        engines=[{"name": engine, "version": "1"}],
                        models=[],
                    )
                )
        yield url


def rows(url: str, table) -> list:
    with session_scope(url) as s:
        return list(s.scalars(select(table)))


def test_tags_order_by_build_number_not_by_name():
    assert sorted(["b10", "b9", "b100", "b2"], key=lambda t: version_key(LLAMA_CPP, t)) == ["b2", "b9", "b10", "b100"]
    assert version_key(LLAMA_CPP, "master") < version_key(LLAMA_CPP, "b1")  # not a release tag: never newer


def test_a_new_tag_on_the_remote_is_fetched_and_the_newest_becomes_one_campaign(
    pg, remote_and_checkout, history, private_broker
):
    remote, mac = remote_and_checkout
    spec = parse_watch(
        {
            "name": "llama-tags",
            "every": "1h",
            "suite": SUITE,
            "llama_cpp": {"source": str(mac), "tools": ["llama-bench"]},
        }
    )
    assert spec.followed == [LLAMA_CPP] and spec.llama_cpp.bisect and spec.llama_cpp.fetch
    with session_scope(pg) as s:
        watches.add(s, spec)
        assert watches.check_watch(s, "llama-tags", checker="test") == []  # the first look records, no campaign
    assert [v.version for v in rows(pg, WatchVersion)] == ["b1"]

    # Two tags are pushed upstream; the next look fetches them: the newest is measured against the newest seen.
    commits = shas(history)
    git("-C", str(remote), "tag", "b2", commits[1])
    git("-C", str(remote), "tag", "b4", commits[3])
    with session_scope(pg) as s:  # the workers' heartbeat: still online
        s.execute(update(Host).values(last_heartbeat=utcnow()))
    with session_scope(pg) as s:
        (cid,) = watches.check_watch(s, "llama-tags", checker="test")
    (c,) = rows(pg, Campaign)
    assert (c.package, c.engine, c.baseline, c.candidate, c.hosts, c.status) == (
        LLAMA_CPP,
        "llama.cpp",
        "b1",
        "b4",
        ["studio"],  # the online host offering llama.cpp
        "preparing",
    )
    assert {v.version: v.campaign_id for v in rows(pg, WatchVersion)} == {"b1": None, "b2": None, "b4": cid}
    assert "b4" in git("-C", str(mac), "tag")  # fetched into the Mac's checkout

    # Its prepare task carries the build: the checkout, the tag and the options, the candidate first.
    assert advance(pg, private_broker, cid).startswith("preparing: waiting")
    (task,) = sent(private_broker, "studio")
    assert task == {
        "campaign_id": cid,
        "llama_cpp": {"source": str(mac), "ref": "b4", "fetch": True, "cmake_flags": [], "tools": ["llama-bench"]},
    }

    # The remote goes away: the check says so, and still reads the tags the checkout has.
    git("-C", str(mac), "remote", "set-url", "origin", str(remote.parent / "gone.git"))
    with session_scope(pg) as s:
        assert watches.check_watch(s, "llama-tags", checker="test") == []
    last = sorted(rows(pg, WatchCheck), key=lambda c: c.id)[-1]
    assert last.versions == {LLAMA_CPP: ["b1", "b2", "b4"]}
    assert last.error.startswith("fetch failed, the checkout's own tags read") and "gone.git" in last.error


def test_release_archives_in_a_folder(tmp_path):
    for name in (
        "llama-b9-bin-macos-arm64.zip",
        "llama-b10-bin-macos-arm64.zip",
        "llama-b10-bin-ubuntu-x64.zip",
        "llama-b11-bin-win-cpu-x64.zip.part",  # not an archive (yet)
        "notes.txt",
    ):
        (tmp_path / name).write_bytes(b"")
    assert llama_tags.tags({"archives": str(tmp_path)}) == (["b9", "b10"], None)
    assert llama_tags.archive_for(str(tmp_path), "b10") == str(tmp_path / "llama-b10-bin-macos-arm64.zip")
    assert llama_tags.archive_for(str(tmp_path), "b11") is None
    spec = parse_watch({"name": "rel", "every": "1h", "suite": SUITE, "llama_cpp": {"archives": str(tmp_path)}})
    assert spec.llama_cpp.bisect is False  # no commits between two archives to search


def test_the_commits_between_two_tags_are_the_first_parent_line(history):
    between = llama_tags.commits_between(str(history), "b1", "b4")
    assert [(c["sha"], c["number"], c["subject"]) for c in between] == [
        (shas(history)[i], i + 1, SUBJECTS[i]) for i in (1, 2, 3)
    ]
    assert llama_tags.commit_of(str(history), "b1") == {"sha": shas(history)[0], "number": 1, "subject": SUBJECTS[0]}
    with pytest.raises(llama_tags.TagsError, match="is not an ancestor"):
        llama_tags.commits_between(str(history), "b4", "b1")


@pytest.mark.parametrize(
    "payload, why",
    [
        ({"campaign_id": 3, "llama_cpp": {"source": "/src/llama.cpp"}}, "needs source"),
        ({"campaign_id": 3, "llama_cpp": "b4"}, "must be an object"),
        (
            {"campaign_id": 3, "llama_cpp": {"source": "/s", "ref": "b4", "flags": []}},
            "unknown llama_cpp field(s) flags",
        ),
        (
            {"campaign_id": 3, "llama_cpp": {"source": "/s", "ref": "b4", "tools": "llama-bench"}},
            "tools must be a list",
        ),
        ({"campaign_id": 3, "requirement": "mlx-lm==1", "llama_cpp": {"archive": "/a.zip"}}, "not both"),
    ],
)
def test_a_malformed_build_request_is_the_campaigns_error_by_field(payload, why):
    cid, error = check_payload(payload)
    assert cid == 3 and why in error
    assert check_payload({"campaign_id": 3, "llama_cpp": {"archive": "/srv/llama-b4-bin-macos-arm64.zip"}}) == (3, None)


def test_a_tilde_source_is_each_machines_home_and_a_worker_may_declare_its_own(history, tmp_path, monkeypatch):
    """`source: ~/src/llama.cpp` is sent as written (a Mac's home is not the coordinator's) and read on each machine
    in its own home; a worker whose clone lives elsewhere declares it (SILICONBENCH_LLAMA_SOURCE)."""
    home = tmp_path / "home"
    git("clone", "--quiet", str(history), str(home / "src" / "llama.cpp"))
    monkeypatch.setenv("HOME", str(home))
    spec = parse_watch(
        {"name": "tags", "every": "1h", "llama_cpp": {"source": "~/src/llama.cpp"}, "suite": SUITE}, base_dir=tmp_path
    )
    assert spec.llama_cpp.source == "~/src/llama.cpp"  # not /…/home/src/llama.cpp: that path is this machine's
    # the coordinator reads the tags through the same `~`, expanded where git runs
    assert llama_tags.sha_of(spec.llama_cpp.source, "b1") == git(
        "-C", str(home / "src" / "llama.cpp"), "rev-parse", "b1^{commit}"
    )
    build = {"source": spec.llama_cpp.source, "ref": "b1"}
    assert checkout_of(build) == str(home / "src" / "llama.cpp")
    own = tmp_path / "elsewhere" / "llama.cpp"
    monkeypatch.setenv("SILICONBENCH_LLAMA_SOURCE", str(own))
    assert checkout_of(build) == str(own)
