"""Results recorded before the like-for-like defaults (flash_attn off, llama-cpp-python's thread split, no
dtypes) stay readable and are never pooled with new ones: their identity differs."""

from __future__ import annotations

from siliconbench.contract.jobs import digest
from siliconbench.contract.results import JobResult

from siliconbench.coordinator.reads.queries import series
from siliconbench.storage import result_store, sweep_store
from siliconbench.storage.database import session_scope
from tests.storage.records import SPEC, make_env, make_job, make_result


def _new_style(job, engine: str):
    """The same configuration as the new defaults record it: options as effectively applied, and dtypes."""
    opts = {k: v for k, v in job.engine_options.items() if k != "flash_attn"}
    new = job.model_copy(
        update={
            "engine_options": {**opts, "flash_attn": "auto", "type_k": "f16", "type_v": "f16"},
            "sweep_id": job.sweep_id + "-new",
        }
    )
    new.job_id = digest({"sweep": new.sweep_id, **new.key()})
    result = make_result(new)
    env = make_env(engine).model_copy(
        update={
            "engine_options": {
                "threads": 16,
                "threads_batch": 16,
                "flash_attn": "auto",
                "flash_attn_effective": "enabled",
                "type_k": "f16",
                "type_v": "f16",
            },
            "dtypes": {"weights": "F16", "activations": "f32", "kv_cache": "f16"},
        }
    )
    result.environment = env
    return new, result


def test_old_results_read_back_and_keep_their_own_identity(sqlite_url):
    old_job = make_job("llama.cpp", 0)
    old = make_result(old_job)
    # An old record as stored: its environment JSON has no dtypes key at all.
    raw = old.model_dump(mode="json")
    del raw["environment"]["dtypes"]
    old_back = JobResult.model_validate(raw)
    assert old_back.environment.dtypes == {}

    new_job, new = _new_style(old_job, "llama.cpp")
    assert old_back.identity_hash(old_job) != new.identity_hash(new_job)

    with session_scope(sqlite_url) as s:
        sweep_store.create_sweep(s, old_job.sweep_id, SPEC, [old_job])
        result_store.save_result(s, old_job, old_back, host="mac-studio-01")
        sweep_store.create_sweep(s, new_job.sweep_id, SPEC, [new_job])
        result_store.save_result(s, new_job, new, host="mac-studio-01")
    with session_scope(sqlite_url) as s:
        rows, total = series(s)
        loaded = result_store.load_results(s)
    assert total == 2 and len({r["identity_hash"] for r in rows}) == 2  # two series, never one pooled
    assert {res.environment.dtypes.get("weights") for _, res in loaded} == {None, "F16"}
