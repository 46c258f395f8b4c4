"""A fleet's worth of results in a PostgreSQL database, seeded with COPY through the current schema: what the
dashboard benchmark times its queries on (benchmarks/dashboard_queries.py).

12 hosts, 4 models, both engines, 3 quantizations, 3 prompt lengths x 2 depths, 5 repetitions + 1 warmup, ~2% failed
jobs. Every table a stored result fills is filled as ``result_store.save_result`` fills it: the results row (with its
``disturbed`` verdict), its samples, its per-metric summaries (``storage.summaries.summary_rows``, the one arithmetic)
and the identity's first ok result. Tested at its smallest size by tests/benchmarks/test_smoke.py, so a schema change
that it misses fails there, not in the next person's hands.
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, datetime, timedelta

from siliconbench.contract.jobs import JobSpec, digest
from siliconbench.contract.results import Environment

from siliconbench.storage import database as db, sweep_store
from siliconbench.storage.database import session_scope
from siliconbench.storage.summaries import summary_rows

MODELS = ["tiny-llama-5m", "tiny-llama-30m", "smollm2-135m", "llama-3.2-1b"]
QUANTS = {
    "llama.cpp": [("F16", "full"), ("Q8_0", "q8"), ("Q4_K_M", "q4")],
    "mlx": [("f32", "full"), ("8bit", "q8"), ("4bit", "q4")],
}
METRICS = {
    "llama.cpp": ["prefill_tps", "decode_tps", "ttft_ms", "engine_prefill_tps", "engine_decode_tps"],
    "mlx": ["prefill_tps", "decode_tps", "ttft_ms", "mlx_peak_memory_bytes"],
}
CHIPS = ["Apple M1", "Apple M2 Pro", "Apple M2 Ultra", "Apple M3 Max", "Apple M4", "Apple M4 Pro"]
PROMPTS, DEPTHS, REPS, WARMUP = (128, 512, 2048), (0, 2048), 5, 1
T0 = datetime(2026, 6, 1, tzinfo=UTC)


def environment(host: int, engine: str, new: bool) -> Environment:
    pkgs = (
        {"llama-cpp-python": "0.3.36" if new else "0.3.35"}
        if engine == "llama.cpp"
        else {"mlx": "0.32.4", "mlx-lm": "0.32.2" if new else "0.32.1"}
    )
    return Environment(
        hostname=f"mac-{host:02d}.local",
        os="Darwin",
        os_version="15.1 (24B83)",
        chip=CHIPS[host % len(CHIPS)],
        cores=12,
        memory_bytes=(32 << host % 3) * 2**30,
        machine="arm64",
        python="3.11.7",
        packages=pkgs,
        backend="Metal",
        engine_build={"ggml_commit": "0c1e570"} if engine == "llama.cpp" else {},
        engine_options={"threads": 12},
    )


def seed(url: str, n_samples: int) -> dict:
    """COPY sweeps, jobs, results, samples, summaries, identities and hosts; returns what the timed queries
    filter on."""
    import psycopg

    rnd = random.Random(0)
    u = db.normalize_url(url)
    info = dict(host=u.host, port=u.port or 5432, user=u.username, password=u.password, dbname=u.database)
    sweeps, jobs, samples, summaries = [], [], [], []
    t = T0
    while len(samples) < n_samples:
        i = len(sweeps)
        host, new = i % 12, i > 250
        sid, models = f"sweep{i:04d}-{uuid.UUID(int=rnd.getrandbits(128)).hex[:8]}", rnd.sample(MODELS, 2)
        t += timedelta(minutes=37)
        n0 = len(jobs)
        for model in models:
            for qi, p, d in ((qi, p, d) for qi in range(3) for p in PROMPTS for d in DEPTHS):
                for engine in ("llama.cpp", "mlx"):
                    quant, level = QUANTS[engine][qi]
                    j = JobSpec(
                        job_id="",
                        sweep_id=sid,
                        sweep_name=f"sweep{i}",
                        index=len(jobs) - n0,
                        model=model,
                        engine=engine,
                        quant=quant,
                        quant_level=level,
                        artifact=f"{model}/{quant}",
                        model_sha256=digest(model + quant, 64),
                        n_prompt=p,
                        n_gen=128,
                        n_depth=d,
                        repetitions=REPS,
                        warmup=WARMUP,
                        delay_s=0.0,
                        seed=0,
                        timeout_s=900,
                        engine_options={"threads": None},
                    )
                    j.job_id = digest({"sweep": sid, **j.key()})
                    ok = rnd.random() > 0.02
                    env = environment(host, engine, new)
                    values = {"load_s": 0.4, "peak_memory_bytes": rnd.randint(2**29, 2**33)} if ok else {}
                    identity = digest({"job": j.key(), "env": env.identity()})
                    jobs.append((j, host, env, t, ok, values, identity))
                    if not ok:
                        continue
                    base = (3000 if engine == "llama.cpp" else 2200) / (1 + MODELS.index(model)) / (1 + qi * 0.1)
                    rows = [
                        (j.job_id, rep, rep < WARMUP, m, base * rnd.uniform(0.9, 1.1))
                        for rep in range(WARMUP + REPS)
                        for m in METRICS[engine]
                    ]
                    samples += rows
                    stored = [{"warmup": w, "metric": m, "value": v} for _, _, w, m, v in rows]
                    summaries += [(j.job_id, identity, r) for r in summary_rows(stored, values)]
        sweeps.append((sid, f"sweep{i}", t, len(jobs) - n0))
    with psycopg.connect(**info) as conn, conn.cursor() as cur:  # one transaction, committed on exit
        with cur.copy("COPY sweeps (id, name, spec, created_at, status, n_jobs) FROM STDIN") as cp:
            for sid, name, when, n in sweeps:
                cp.write_row((sid, name, json.dumps({"name": name, "models": MODELS[:2]}), when, "done", n))
        with cur.copy(
            "COPY jobs (id, sweep_id, idx, spec, model, engine, quant, quant_level, workload, n_prompt, "
            "n_gen, n_depth, repetitions, model_sha256, status, attempts, host, worker, created_at, "
            "started_at, finished_at) FROM STDIN"
        ) as cp:
            for j, host, _, when, ok, _, _ in jobs:
                cp.write_row(
                    (
                        j.job_id,
                        j.sweep_id,
                        j.index,
                        j.model_dump_json(),
                        j.model,
                        j.engine,
                        j.quant,
                        j.quant_level,
                        j.workload,
                        j.n_prompt,
                        j.n_gen,
                        j.n_depth,
                        j.repetitions,
                        j.model_sha256,
                        "ok" if ok else "failed",
                        1,
                        f"mac-{host:02d}.local",
                        f"w{host:02d}",
                        when,
                        when,
                        when,
                    )
                )
        with cur.copy(
            "COPY results (job_id, status, error, stderr_tail, started_at, finished_at, wall_s, load_s, "
            "peak_memory_bytes, baseline_memory_bytes, hostname, chip, identity_hash, environment, extra, "
            "created_at, engine_version, disturbed) FROM STDIN"
        ) as cp:
            for j, _, env, when, ok, values, identity in jobs:
                cp.write_row(
                    (
                        j.job_id,
                        "ok" if ok else "failed",
                        None if ok else "engine error: out of memory",
                        None if ok else "error: out of memory\n",
                        when,
                        when,
                        rnd.uniform(5, 60),
                        values.get("load_s"),
                        values.get("peak_memory_bytes"),
                        2**26,
                        env.hostname,
                        env.chip,
                        identity,
                        env.model_dump_json(),
                        "{}",
                        when,
                        env.engine_version(j.engine),
                        False,
                    )
                )
        with cur.copy("COPY result_identities (identity_hash, job_id) FROM STDIN") as cp:
            first: dict[str, str] = {}
            for j, *_, ok, _, identity in jobs:
                if ok:
                    first.setdefault(identity, j.job_id)
            for identity, job_id in first.items():
                cp.write_row((identity, job_id))
        with cur.copy(
            "COPY result_summaries (job_id, identity_hash, status, disturbed, metric, n, mean, median, var, min, max) "
            "FROM STDIN"
        ) as cp:
            for job_id, identity, r in summaries:
                cp.write_row(
                    (
                        job_id,
                        identity,
                        "ok",
                        False,
                        r["metric"],
                        r["n"],
                        r["mean"],
                        r["median"],
                        r["var"],
                        r["min"],
                        r["max"],
                    )
                )
        with cur.copy(
            "COPY hosts (name, hostname, chip, memory_bytes, os, info, engines, models, online, "
            "last_heartbeat, current_job_id) FROM STDIN"
        ) as cp:
            for h in range(12):
                cp.write_row(
                    (
                        f"w{h:02d}",
                        f"mac-{h:02d}.local",
                        CHIPS[h % len(CHIPS)],
                        (32 << h % 3) * 2**30,
                        "Darwin",
                        "{}",
                        json.dumps([{"name": "llama.cpp", "version": "0.3.36"}, {"name": "mlx", "version": "0.32.2"}]),
                        json.dumps([{"name": m, "artifacts": []} for m in MODELS]),
                        h % 4 != 0,
                        datetime.now(UTC) - timedelta(seconds=h),
                        None,
                    )
                )
        with cur.copy("COPY samples (job_id, repetition, warmup, metric, value) FROM STDIN") as cp:
            for row in samples:
                cp.write_row(row)
    with psycopg.connect(**info, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")  # as autovacuum would after a bulk load: statistics, visibility map
    j0 = jobs[-1][0]
    return {
        "sweeps": len(sweeps),
        "jobs": len(jobs),
        "samples": len(samples),
        "latest": sweeps[-1][0],
        "model": j0.model,
        "host": f"mac-{jobs[-1][1]:02d}.local",
        "job": j0.job_id,
        "plan": [x[0] for x in jobs[-72:]],
    }


def existing(url: str) -> dict:
    """What the timed queries filter on, read back from a database seeded before (--database)."""
    from sqlalchemy import func, select

    from siliconbench.contract.jobs import JobSpec as Spec

    from siliconbench.storage.tables import Job, SampleRow, Sweep

    with session_scope(url) as x:
        latest = sweep_store.latest_sweep_id(x)
        specs = list(x.execute(select(Job.spec, Job.host).order_by(Job.created_at.desc(), Job.idx.desc()).limit(72)))
        plan = [Spec.model_validate(spec) for spec, _ in reversed(specs)]
        n = {t.__tablename__: x.scalar(select(func.count()).select_from(t)) for t in (Sweep, Job, SampleRow)}
    return {
        "sweeps": n["sweeps"],
        "jobs": n["jobs"],
        "samples": n["samples"],
        "latest": latest,
        "model": plan[-1].model,
        "host": specs[0][1],
        "job": plan[-1].job_id,
        "plan": plan,
    }
