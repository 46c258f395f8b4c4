"""The multiprocess workload on both real engines: K engine processes decoding at once, none left after."""

from __future__ import annotations

import json

import pytest

from siliconbench.coordinator.reports.export import result_record
from tests.workload_helpers import assert_no_process_left, jobs_for, run, values


@pytest.mark.parametrize("engine", ["llama.cpp", "mlx"])
def test_multiprocess(models_dir, engine):
    (job,) = jobs_for(
        models_dir, {"kind": "multiprocess", "processes": [2], "prompt_tokens": 16, "gen_tokens": 16}, engines=[engine]
    )
    res, events = run(job, models_dir)
    assert res.status == "ok", (res.error, res.stderr_tail)
    assert_no_process_left(events)
    per_process, agg = values(res, "mp_process_decode_tps"), values(res, "mp_aggregate_decode_tps")
    assert len(per_process) == 4 and len(agg) == 2 and all(v > 0 for v in per_process + agg)
    # the aggregate spans from the first start to the last end: never above the sum of the processes' rates
    assert agg[0] <= sum(per_process[:2]) * 1.001
    for rss, pss in zip(values(res, "mp_total_rss_bytes"), values(res, "mp_total_pss_bytes"), strict=True):
        assert rss >= pss > 0
    assert len(res.extra["load_s_per_process"]) == 2
    json.dumps(result_record(job, res))
