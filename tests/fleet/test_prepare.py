"""The fleet prepares itself: a real worker, on its own least-privilege login, makes a campaign
candidate's engine environment when told through the broker, reports it in campaign_hosts, and goes on running jobs.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from siliconbench.contract.queues import TASK_PREPARE_ENV, host_queue

from harness.fleet import wait_for
from harness.llama_repo import BUILDS, make_repo, release_archive
from siliconbench.coordinator.fleet import sweeps as fleet
from siliconbench.coordinator.watch.campaigns.prepare import build_fields
from siliconbench.storage import database
from siliconbench.storage.broker import send_task
from siliconbench.storage.campaign_hosts import env_reports, report_env
from siliconbench.storage.tables import Host
from siliconbench.storage.watch_tables import Campaign, Watch
from siliconbench.worker.envs.builds import add_build
from tests.envs_support import OTHER_MLX_LM
from tests.fleet.support import results_of, sweep, wait_done

NAME = "prep-1"


def campaign(url: str, candidate: str) -> int:
    with database.session_scope(url) as s:
        if s.get(Watch, "mlx") is None:
            s.add(Watch(name="mlx", spec={"packages": ["mlx-lm"]}))
            s.flush()
        c = Campaign(
            watch="mlx",
            package="mlx-lm",
            engine="mlx",
            baseline="0.32.2",
            candidate=candidate,
            hosts=[NAME],
            sweep_ids=[],
            verdicts={},
        )
        s.add(c)
        s.flush()
        return c.id


def report(url: str, cid: int, after=None) -> dict | None:
    with database.session_scope(url) as s:
        row = env_reports(s, cid).get(NAME)
    if row and row["status"] != "pending" and (after is None or row["reported_at"] > after):
        return row
    return None


def prepare(broker: str, payload: dict) -> None:
    send_task(broker, TASK_PREPARE_ENV, payload, host_queue(NAME))


def test_report_env_upserts_one_row_per_host(empty_db):
    cid = campaign(empty_db, "0.31.3")
    with database.session_scope(empty_db) as s:
        report_env(s, cid, "a", status="pending")
        report_env(s, cid, "b", status="failed", error="pip could not install")
    with database.session_scope(empty_db) as s:
        report_env(s, cid, "a", status="ready", env_name="mlx-lm-0.31.3", packages={"mlx-lm": "0.31.3"})
    with database.session_scope(empty_db) as s:
        rows = env_reports(s, cid)
    assert sorted(rows) == ["a", "b"]
    assert (
        rows["a"]["status"] == "ready" and rows["a"]["packages"] == {"mlx-lm": "0.31.3"} and rows["a"]["error"] is None
    )
    assert rows["b"]["status"] == "failed" and rows["b"]["env_name"] is None and rows["a"]["reported_at"]


def test_worker_prepares_the_candidate_reports_it_and_still_runs_jobs(
    models_dir,
    pg_url,
    broker_url,
    workers,  # noqa: F811
    tmp_path,
):
    envs_dir = tmp_path / "worker-envs"
    w = workers(NAME, models_dir, env={"SILICONBENCH_ENVS_DIR": str(envs_dir)})
    good, bad = campaign(pg_url, OTHER_MLX_LM), campaign(pg_url, "0.0.0")

    prepare(
        broker_url,
        {
            "campaign_id": good,
            "requirement": f"mlx-lm=={OTHER_MLX_LM}",
            "extra": [],
            "find_links": None,
            "index_url": None,
        },
    )
    row = wait_for(lambda: report(pg_url, good), 240, every_s=1, what="the ready report")
    assert row["status"] == "ready", row["error"]
    assert row["env_name"] == f"mlx-lm-{OTHER_MLX_LM}" and row["packages"]["mlx-lm"] == OTHER_MLX_LM
    assert (envs_dir / row["env_name"] / "bin" / "python").exists()  # in the worker's own envs dir
    with database.session_scope(pg_url) as s:  # advertised at once: placement can pin the suite to it
        engines = {e["name"]: e["version"] for e in s.scalars(select(Host.engines).where(Host.name == NAME)).one()}
    assert OTHER_MLX_LM in engines["mlx"].split(", ")

    # A redelivered task finds the environment made and reports ready again.
    first = row["reported_at"]
    prepare(broker_url, {"campaign_id": good, "requirement": f"mlx-lm=={OTHER_MLX_LM}"})
    again = wait_for(lambda: report(pg_url, good, after=first), 60, every_s=0.5, what="the second report")
    assert again["status"] == "ready" and again["env_name"] == row["env_name"]
    assert "exists already" in w.logs()

    # A version pip cannot find is this host's error for the campaign, with pip's reason.
    prepare(broker_url, {"campaign_id": bad, "requirement": "mlx-lm==0.0.0"})
    failed = wait_for(lambda: report(pg_url, bad), 120, every_s=1, what="the failed report")
    assert failed["status"] == "failed" and "pip could not install mlx-lm==0.0.0" in failed["error"]
    assert "0.0.0" in failed["error"].split("\n", 1)[1]  # pip's own lines follow
    assert not (envs_dir / "mlx-lm-0.0.0").exists()

    # Malformed messages: refused with a log line (no campaign to blame) or the campaign's error.
    prepare(broker_url, {"campaign_id": "seven", "requirement": "mlx-lm==0.31.3"})
    prepare(broker_url, {"campaign_id": bad, "requirement": 42})
    wait_for(
        lambda: "requirement must be a string" in (report(pg_url, bad) or {}).get("error", ""),
        30,
        what="the malformed payload's report",
    )
    assert "refused a malformed prepare_env message: campaign_id 'seven'" in w.logs()

    # The worker is alive and runs a job under the environment it made.
    sid = fleet.submit(
        sweep(engines=["mlx"], hosts=[NAME], engine_versions={"mlx": [OTHER_MLX_LM]}, processes=1),
        database_url=pg_url,
        broker_url=broker_url,
    )
    wait_done(pg_url, sid)
    recs = results_of(pg_url, sid)
    assert w.alive() and [r["status"] for r in recs] == ["ok"], Path(w.log_path).read_text()[-3000:]
    assert recs[0]["engine_version"] == OTHER_MLX_LM  # the package the job ran under


def test_worker_unpacks_the_release_archive_a_tags_watch_names_and_advertises_its_tag(
    models_dir,
    pg_url,
    broker_url,
    workers,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    """A watch on a folder of llama.cpp release archives: the campaign's prepare task names the tag's archive
    (coordinator side, ``build_fields``) and the worker records it as a build by what its own tools say, reports its
    version and advertises it, so the campaign's sweep can name ``b1``."""
    monkeypatch.setenv("SILICONBENCH_BUILDS_DIR", str(BUILDS))
    repo = make_repo()
    built = Path(add_build(repo, "b1", tools=("llama-bench",), root=tmp_path / "mine").build["path"]) / "bin"  # kept
    releases = tmp_path / "releases"
    releases.mkdir()
    archive = release_archive(built, releases / "llama-b1-bin-ubuntu-x64.zip")
    fields = build_fields({"archives": str(releases)}, "b1")
    assert fields == {"archive": str(archive)}

    workers(
        NAME,
        models_dir,
        env={"SILICONBENCH_ENVS_DIR": str(tmp_path / "envs"), "SILICONBENCH_BUILDS_DIR": str(tmp_path / "builds")},
    )
    cid = campaign(pg_url, "b1")
    prepare(broker_url, {"campaign_id": cid, "llama_cpp": fields})
    row = wait_for(lambda: report(pg_url, cid), 240, every_s=1, what="the ready report")
    assert row["status"] == "ready", row["error"]
    assert row["env_name"] == "llama.cpp-b1" and row["packages"] == {"llama.cpp": "b1"}  # no binding trusted
    with database.session_scope(pg_url) as s:
        engines = {e["name"]: e["version"] for e in s.scalars(select(Host.engines).where(Host.name == NAME)).one()}
    assert "b1" in engines["llama.cpp"].split(", ")

    # A tag whose archive is not in the folder: the worker says so, as this host's error for the campaign.
    missing = campaign(pg_url, "b2")
    prepare(broker_url, {"campaign_id": missing, "llama_cpp": build_fields({"archives": str(releases)}, "b2")})
    failed = wait_for(lambda: report(pg_url, missing), 120, every_s=1, what="the failed report")
    assert failed["status"] == "failed" and "llama-b2-bin" in failed["error"], failed["error"]
