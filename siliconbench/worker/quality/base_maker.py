"""A KL-divergence base computed in a fresh process of the base's own engine: ``python -m siliconbench.worker.quality.base_maker``.

A job of one engine needs the other engine's base too, and an engine's process is set up before it starts (MLX's
BLAS is an LD_PRELOAD on Linux): computed inside a llama.cpp job, an MLX base ran on MLX's bundled reference BLAS,
single-threaded and ~30x slower. So every base a job does not produce from its own pass is made here, in a child
with the environment a job of that engine gets, and read back from the store (siliconbench/worker/quality/bases.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from siliconbench.contract.engines import describe
from siliconbench.contract.errors import WorkloadError

from siliconbench.worker.engines import get_engine
from siliconbench.worker.envs.blas import child_blas_env, inherited_preload
from siliconbench.worker.quality import bases
from siliconbench.worker.quality.kld import BaseRows, base_rows

STDERR_TAIL = 2000


def make(
    models_dir: Path, spec: dict, key: bases.BaseKey, chunks: list[list[int]], first: int, n_ctx: int, options: dict
) -> list[BaseRows]:
    """Compute and store the base ``key`` of ``spec`` (engine, artifact) in a child of that engine; its rows,
    read back once from the store."""
    env = {**os.environ, "LD_PRELOAD": inherited_preload()}  # e.g. an MLX job's OpenBLAS is not the base's business
    if describe(spec["engine"]).preloads_blas:
        env.update(child_blas_env(options.get("blas", "auto"), options.get("threads")))
    request = {
        "models_dir": str(models_dir),
        "spec": spec,
        "key": key.__dict__,
        "chunks": chunks,
        "first": first,
        "n_ctx": n_ctx,
        "options": options,
    }
    run = subprocess.run(
        [sys.executable, "-m", "siliconbench.worker.quality.base_maker"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=env,
    )
    rows = bases.load(key, models_dir) if run.returncode == 0 else None
    if rows is None:
        raise WorkloadError(
            f"computing the KL-divergence base {spec['engine']} {spec['quant']} failed "
            f"(exit {run.returncode}): {run.stderr.strip()[-STDERR_TAIL:]}"
        )
    return rows


def _make_here(request: dict) -> None:
    models_dir, spec = Path(request["models_dir"]), request["spec"]
    key = bases.BaseKey(**request["key"])
    engine = get_engine(spec["engine"])
    options = {**request["options"], "logits_all": True}
    engine.options = options
    engine.load(models_dir / spec["artifact"], options, n_ctx=request["n_ctx"])
    chunks, first = request["chunks"], request["first"]
    bases.check_size(len(chunks), len(chunks[0]) - 1 - first, engine.vocab_size())
    rows = [base_rows(engine.window_logits(chunk, first)) for chunk in chunks]
    engine.close()
    bases.save(key, models_dir, rows)


if __name__ == "__main__":
    sys.stdout = sys.stderr  # engine chatter stays out of the way
    _make_here(json.loads(sys.stdin.read()))
