"""The long_context workload on both real engines: KV-cache memory from the engine checked against the model's shape."""

from __future__ import annotations

import math

from siliconbench.contract.manifest import ModelCatalog

from siliconbench.coordinator.fleet.placement import kv_cache_bytes
from siliconbench.worker.measure import roofline
from siliconbench.worker.models.facts import form_facts
from siliconbench.worker.models.make.tiny import make_tiny
from tests import model_cache
from tests.conftest import SMALL
from tests.workload_helpers import jobs_for, run, values


def test_long_context_kv_memory_engine_and_shape(models_dir):
    jobs = jobs_for(models_dir, {"kind": "long_context", "depths": [64, 300], "gen_tokens": 8})
    m = ModelCatalog(models_dir).get(SMALL)
    assert sorted((j.engine, j.params["depth"]) for j in jobs) == [
        ("llama.cpp", 64),
        ("llama.cpp", 300),
        ("mlx", 64),
        ("mlx", 300),
    ]
    for job in jobs:
        res, _ = run(job, models_dir)
        assert res.status == "ok", (res.error, res.stderr_tail)
        depth = job.params["depth"]
        assert all(v > 0 for v in values(res, "prefill_tps") + values(res, "decode_tps"))
        kv, shape = values(res, "kv_cache_bytes"), values(res, "kv_cache_computed_bytes")
        per_token = 2 * m.n_layers * m.n_kv_heads * m.head_size * res.extra["kv_dtype_bytes"]
        assert shape == [per_token * (depth + 8)] * 2
        if job.engine == "llama.cpp":  # used cells' K and V plus a little metadata
            assert res.extra["kv_dtype_bytes"] == 2
            assert shape[0] <= kv[0] <= shape[0] * 1.01 + 64 * 1024
        else:  # arrays as allocated: whole 256-token steps
            assert res.extra["kv_dtype_bytes"] == 4
            assert kv[0] == per_token * math.ceil((depth + 8) / 256) * 256
        assert res.extra["kv_tokens"] == depth + 8


WIDE_HEADS = dict(hidden_size=128, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=64, vocab_size=512, seed=1)


def test_a_declared_head_size_is_read_from_the_files_not_taken_as_hidden_over_heads(tmp_path):
    """Qwen3's and Gemma's shape: heads of 64 with hidden 128 and 4 heads (hidden / heads would say 32). The GGUF
    says so in llama.attention.key_length, the folder in head_dim; the manifest, the KV-cache figure from the shape
    and the roofline's bytes per token read it, and the engines' own KV bytes agree with it."""
    name = "wide-heads"
    m = model_cache.cached_model(
        tmp_path, name, lambda where: make_tiny(where, name=name, **WIDE_HEADS), recipe=repr(WIDE_HEADS)
    )
    assert (m.head_dim, m.head_size) == (64, 64) and m.hidden_size // m.n_heads == 32
    gguf, mlx = m.artifact_for("llama.cpp", "F32"), m.artifact_for("mlx", "f32")
    assert form_facts(tmp_path / name / gguf.path).head_dim == 64 == form_facts(tmp_path / name / mlx.path).head_dim
    per_token = 2 * m.n_layers * m.n_kv_heads * 64 * 2  # K and V, f16
    assert roofline.kv_bytes_per_token(m, 1, "f16") == per_token == kv_cache_bytes(m, 1)
    jobs = jobs_for(tmp_path, {"kind": "long_context", "depths": [40], "gen_tokens": 8}, models=[name])
    assert sorted(j.engine for j in jobs) == ["llama.cpp", "mlx"]
    for job in jobs:
        res, _ = run(job, tmp_path)
        assert res.status == "ok", (res.error, res.stderr_tail)
        assert res.extra["head_dim"] == 64
        kv, shape = values(res, "kv_cache_bytes"), values(res, "kv_cache_computed_bytes")
        per = 2 * m.n_layers * m.n_kv_heads * 64 * res.extra["kv_dtype_bytes"]
        assert shape[0] == per * 48
        if job.engine == "llama.cpp":  # used cells' K and V: half of this with the Llama shape assumed
            assert shape[0] <= kv[0] <= shape[0] * 1.01 + 64 * 1024
        else:  # arrays as allocated: whole 256-token steps
            assert kv[0] == per * 256
