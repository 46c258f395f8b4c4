"""The long_context workload on both real engines: KV-cache memory from the engine checked against the model's shape."""

from __future__ import annotations

import math

from siliconbench.manifest import ModelCatalog

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
        per_token = 2 * m.n_layers * m.n_kv_heads * (m.hidden_size // m.n_heads) * res.extra["kv_dtype_bytes"]
        assert shape == [per_token * (depth + 8)] * 2
        if job.engine == "llama.cpp":  # used cells' K and V plus a little metadata
            assert res.extra["kv_dtype_bytes"] == 2
            assert shape[0] <= kv[0] <= shape[0] * 1.01 + 64 * 1024
        else:  # arrays as allocated: whole 256-token steps
            assert res.extra["kv_dtype_bytes"] == 4
            assert kv[0] == per_token * math.ceil((depth + 8) / 256) * 256
        assert res.extra["kv_tokens"] == depth + 8
