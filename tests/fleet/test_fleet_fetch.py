"""A Mac that lacks a sweep's model fetches it: a real Celery worker, real Redis and PostgreSQL, real files.

The model is added on the "origin" Mac from an http:// URL served on loopback (https:// in a real fleet: the same
code) and from a file:// shared folder; a new worker with an empty models folder is sent the sweep, fetches
both forms, checks their digests and runs the jobs. A copy whose bytes changed after `models add` is refused
with both digests. A model that exists only as a file on one Mac is refused at submit, with what to do.
"""

from __future__ import annotations

import shutil
import socket

import pytest
from sqlalchemy import func, select

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import ModelCatalog, sha256_path

from siliconbench.coordinator.fleet import sweeps as fleet
from siliconbench.storage import database
from siliconbench.storage.fleet_models import list_models
from siliconbench.storage.tables import Host, Job
from siliconbench.worker.models.add import add_model
from siliconbench.worker.runtime.registration import register
from tests.cli_support import sb
from tests.conftest import SMALL
from tests.fleet.support import job_rows, results_of, sweep, wait_done
from tests.http_files import FileServer


@pytest.fixture
def shared(tmp_path, models_dir):
    """The tiny model's Q4_K_M GGUF (served over HTTP) and its MLX 4-bit folder (on a 'shared folder')."""
    tiny = ModelCatalog(models_dir).get(SMALL)
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(models_dir / SMALL / tiny.artifact_for("llama.cpp", "Q4_K_M").path, served / "tiny-Q4_K_M.gguf")
    shutil.copy(models_dir / SMALL / tiny.artifact_for("llama.cpp", "Q8_0").path, served / "tiny-Q8_0.gguf")
    nas = tmp_path / "nas"
    shutil.copytree(models_dir / SMALL / tiny.artifact_for("mlx", "q4").path, nas / "tiny-mlx-4bit")
    return served, nas


def test_a_worker_fetches_a_model_it_lacks_verifies_it_and_runs_the_job(tmp_path, shared, pg_url, broker_url, workers):
    served, nas = shared
    origin_models, new_models = tmp_path / "origin-models", tmp_path / "new-models"
    new_models.mkdir()
    with FileServer(served) as srv:
        add_model(origin_models, "byo", [f"{srv.url}/tiny-Q4_K_M.gguf", f"file://{nas}/tiny-mlx-4bit"])
        register(pg_url, "mac-origin", origin_models)  # the Mac where the user ran `models add`
        w = workers("mac-new", new_models)
        spec = sweep(models=["byo"], quantizations=["q4"], hosts=["mac-new"])
        sid, placement = fleet.submit_sweep(spec, database_url=pg_url, broker_url=broker_url)
        assert all(j.fetch is not None for j in placement.jobs)
        wait_done(pg_url, sid, timeout_s=240)
        assert any(path == "/tiny-Q4_K_M.gguf" for path, _ in srv.requests)
    records = results_of(pg_url, sid)
    assert sorted((r["engine"], r["status"], r["worker"]) for r in records) == [
        ("llama.cpp", "ok", "mac-new"),
        ("mlx", "ok", "mac-new"),
    ], [r.get("error") for r in records]
    fetched = ModelCatalog(new_models).get("byo")
    assert {a.quant for a in fetched.artifacts} == {"Q4_K_M", "4bit"}
    for a in fetched.artifacts:  # real files on this Mac, their digests the origin's
        p = new_models / "byo" / a.path
        assert not p.is_symlink() and sha256_path(p) == a.sha256
    with database.session_scope(pg_url) as s:
        host = s.get(Host, "mac-new")
        assert {m["name"] for m in host.models} == {"byo"} and host.activity is None
    assert "fetching byo" in w.logs()


def test_a_copy_whose_digest_differs_is_refused_with_both_digests(tmp_path, shared, pg_url, broker_url, workers):
    served, _nas = shared
    origin_models, new_models = tmp_path / "origin-models", tmp_path / "new-models"
    new_models.mkdir()
    with FileServer(served) as srv:
        m = add_model(origin_models, "byo8", [f"{srv.url}/tiny-Q8_0.gguf"])
        data = bytearray((served / "tiny-Q8_0.gguf").read_bytes())
        data[-1] ^= 0xFF  # the served copy changes after it was added
        (served / "tiny-Q8_0.gguf").write_bytes(bytes(data))
        register(pg_url, "mac-origin", origin_models)
        workers("mac-new", new_models, engines="llama.cpp")
        sid, _ = fleet.submit_sweep(
            sweep(models=["byo8"], quantizations=["q8"], engines=["llama.cpp"], hosts=["mac-new"]),
            database_url=pg_url,
            broker_url=broker_url,
        )
        wait_done(pg_url, sid, timeout_s=120)
    ((_, status, attempts, _, error),) = job_rows(pg_url, sid)
    want = m.artifacts[0].sha256
    assert status == "failed" and attempts == 1
    assert want in error and sha256_path(served / "tiny-Q8_0.gguf") in error, error
    assert not (new_models / "byo8").exists()  # nothing registered, no partial file left under its name


def test_a_model_only_one_mac_has_is_refused_at_submit_with_what_to_do(
    tmp_path, pg_url, broker_url, workers, models_dir
):
    tiny = ModelCatalog(models_dir).get(SMALL)
    origin_models, new_models = tmp_path / "origin-models", tmp_path / "new-models"
    new_models.mkdir()
    add_model(origin_models, "local", [str(models_dir / SMALL / tiny.artifact_for("llama.cpp", "Q8_0").path)])
    register(pg_url, "mac-origin", origin_models)
    workers("mac-new", new_models, engines="llama.cpp")
    with pytest.raises(UserError) as e:
        fleet.submit_sweep(
            sweep(models=["local"], quantizations=["q8"], engines=["llama.cpp"], hosts=["mac-new"]),
            database_url=pg_url,
            broker_url=broker_url,
        )
    assert f"on {socket.gethostname()} only" in e.value.message
    assert "siliconbench models add local" in e.value.message and "--to-existing` on mac-new" in e.value.message
    with database.session_scope(pg_url) as s:
        assert s.scalar(select(func.count()).select_from(Job)) == 0  # nothing stored


def test_a_model_published_from_the_coordinator_is_fetched_by_a_worker_and_run(
    tmp_path, shared, pg_url, broker_url, workers
):
    """No Mac holds the model: the operator adds it on the coordinator's machine from fetchable sources and publishes
    it (`siliconbench models publish`); the sweep is placed, the worker fetches both forms and runs the jobs."""
    served, nas = shared
    coordinator_models, new_models = tmp_path / "coordinator-models", tmp_path / "new-models"
    new_models.mkdir()
    with FileServer(served) as srv:
        add_model(coordinator_models, "pub", [f"{srv.url}/tiny-Q4_K_M.gguf", f"file://{nas}/tiny-mlx-4bit"])
        env = {"SILICONBENCH_DATABASE_URL": pg_url}
        out = sb("models", "publish", "pub", "--dir", str(coordinator_models), env=env)
        assert out.returncode == 0 and "published to the fleet, 2 forms" in out.stdout, out.stdout + out.stderr
        with database.session_scope(pg_url) as s:
            assert [m["name"] for m in list_models(s)] == ["pub"]
        workers("mac-new", new_models)
        spec = sweep(models=["pub"], quantizations=["q4"], hosts=["mac-new"])
        sid, placement = fleet.submit_sweep(spec, database_url=pg_url, broker_url=broker_url)
        assert all(j.fetch is not None for j in placement.jobs)
        wait_done(pg_url, sid, timeout_s=240)
    records = results_of(pg_url, sid)
    assert sorted((r["engine"], r["status"], r["worker"]) for r in records) == [
        ("llama.cpp", "ok", "mac-new"),
        ("mlx", "ok", "mac-new"),
    ], [r.get("error") for r in records]
    assert {a.quant for a in ModelCatalog(new_models).get("pub").artifacts} == {"Q4_K_M", "4bit"}
    again = sb("models", "publish", "pub", "--remove", "--dir", str(coordinator_models), env=env)
    assert again.returncode == 0
    with database.session_scope(pg_url) as s:
        assert list_models(s) == []


def test_a_model_no_other_machine_can_fetch_is_refused_by_publish(tmp_path, pg_url, models_dir):
    out = sb("models", "publish", SMALL, "--dir", str(models_dir), env={"SILICONBENCH_DATABASE_URL": pg_url})
    assert out.returncode != 0 and "cannot be fetched by another machine" in out.stderr + out.stdout
    assert "made here" in out.stderr + out.stdout and "Nothing was run, enqueued or written" in out.stderr
    with database.session_scope(pg_url) as s:
        assert list_models(s) == []
