"""llama-bench records into the results store: each pp or tg test one job and result of one imported sweep, its
options, build and host as llama-bench recorded them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.orm import Session

from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import JobSpec, digest, recorded_options
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.results import Environment, JobResult, JobStatus, Sample
from siliconbench.contract.spec import LlamaCppOptions, parse_sweep

from siliconbench.coordinator.reports.llamabench.records import (
    as_bool,
    as_int,
    as_samples,
    as_time,
    import_level,
    parse,
    quant_of,
)
from siliconbench.storage import result_store, sweep_store
from siliconbench.storage.database import session_scope


def _options(r: dict) -> dict:
    opts = recorded_options(LlamaCppOptions())  # the same option names a siliconbench job records
    opts.update(
        n_batch=as_int(r.get("n_batch"), opts["n_batch"]),
        n_ubatch=as_int(r.get("n_ubatch"), opts["n_ubatch"]),
        n_gpu_layers=as_int(r.get("n_gpu_layers"), opts["n_gpu_layers"]),
    )
    if "use_mmap" in r:
        opts["use_mmap"] = as_bool(r["use_mmap"])
    fa = r.get("flash_attn")
    if fa is not None:
        opts["flash_attn"] = "auto" if str(fa).strip() == "-1" else ("on" if as_bool(fa) else "off")
    for k in ("type_k", "type_v"):
        if r.get(k):
            opts[k] = str(r[k]).lower()
    return {"threads": as_int(r.get("n_threads")) or None, **opts}


def to_results(
    records: list[dict], *, sweep_id: str, host: str, catalog: ModelCatalog | None = None, model: str | None = None
) -> tuple[list[tuple[JobSpec, JobResult]], list[str]]:
    """(job, result) pairs for the store, and a reason for each record skipped."""
    manifest = catalog.get(model, field="--model") if (catalog and model) else None
    pairs, skipped = [], []
    for i, r in enumerate(records):
        n_prompt, n_gen, n_depth = as_int(r.get("n_prompt")), as_int(r.get("n_gen")), as_int(r.get("n_depth"))
        if n_prompt and n_gen:
            skipped.append(f"record {i}: pg{n_prompt},{n_gen} times prompt and generation together")
            continue
        if not n_prompt and not n_gen:
            skipped.append(f"record {i}: neither n_prompt nor n_gen")
            continue
        if str(r.get("backends", "")).startswith("MLX"):
            skipped.append(f"record {i}: an MLX result in llama-bench's shape (siliconbench's own export)")
            continue
        metric = "prefill_tps" if n_prompt else "decode_tps"
        quant = quant_of(str(r.get("model_type", "")))
        filename = str(r.get("model_filename", ""))
        if manifest is not None:
            arts = [a for a in manifest.artifacts if a.format == "gguf"]
            art = next((a for a in arts if Path(a.path).name == Path(filename).name), None) or next(
                (a for a in arts if a.quant.upper() == quant), None
            )
            if art is None:
                raise UserError(
                    "--model",
                    f"model {model!r} has no GGUF artifact of quantization {quant} "
                    f"(record {i}: {r.get('model_type')!r}).",
                    [a.quant for a in arts],
                )
            name, quant, level, artifact, sha = (
                manifest.name,
                art.quant,
                art.level,
                f"{manifest.name}/{art.path}",
                art.sha256,
            )
        else:
            name = Path(filename).stem or str(r.get("model_type"))
            level, artifact = import_level(quant), filename
            sha = "llama-bench:" + digest(
                {
                    "file": Path(filename).name,
                    "size": as_int(r.get("model_size")),
                    "params": as_int(r.get("model_n_params")),
                }
            )
        ts = as_samples(r.get("samples_ts"))
        opts = _options(r)
        job = JobSpec(
            job_id="",
            sweep_id=sweep_id,
            sweep_name="llama-bench",
            index=len(pairs),
            model=name,
            engine="llama.cpp",
            quant=quant,
            quant_level=level,
            artifact=artifact,
            model_sha256=sha,
            n_prompt=n_prompt,
            n_gen=n_gen,
            n_depth=n_depth,
            repetitions=len(ts),
            warmup=0,
            delay_s=0.0,
            seed=0,
            timeout_s=1,
            engine_options=opts,
        )
        job.job_id = digest({"sweep": sweep_id, "record": i, **job.key()})
        when = as_time(r.get("test_time"))
        build = {
            "commit": str(r.get("build_commit", "")),
            "gpu_info": str(r.get("gpu_info", "")),
            "source": "llama-bench",
        }
        if as_int(r.get("build_number")) > 0:
            build["build_number"] = str(as_int(r.get("build_number")))
        env = Environment(
            hostname=host,
            os="",
            os_version="",
            chip=str(r.get("cpu_info", "")),
            cores=0,
            memory_bytes=0,
            machine="",
            python="",
            packages={},
            engine_build=build,
            backend=str(r.get("backends", "")),
            blas="",
            engine_options=opts,
        )
        reported = {metric: float(r["avg_ts"])} if r.get("avg_ts") not in (None, "") else {}
        result = JobResult(
            job_id=job.job_id,
            status=JobStatus.ok,
            started_at=when,
            finished_at=when or datetime.now(UTC),
            samples=[Sample(repetition=k, values={metric: v}) for k, v in enumerate(ts)],
            environment=env,
            extra={"source": "llama-bench", "llama_bench": {"reported": reported, "record": r}},
        )
        pairs.append((job, result))
    return pairs, skipped


def import_records(
    session: Session,
    records: list[dict],
    *,
    sweep_id: str,
    host: str,
    source: str,
    catalog: ModelCatalog | None = None,
    model: str | None = None,
) -> dict:
    """Store llama-bench records as one sweep; UserError if this sweep (the same file) was imported before."""
    pairs, skipped = to_results(records, sweep_id=sweep_id, host=host, catalog=catalog, model=model)
    if not pairs:
        raise UserError(source, "holds no test siliconbench can import: " + "; ".join(skipped))
    jobs = [j for j, _ in pairs]
    spec = parse_sweep(
        {
            "name": "llama-bench",
            "description": f"imported from {source}",
            "models": sorted({j.model for j in jobs}),
            "engines": ["llama.cpp"],
            "quantizations": sorted({j.quant for j in jobs}),
            "repetitions": max(1, max(j.repetitions for j in jobs)),
        }
    )
    try:
        sweep_store.create_sweep(session, sweep_id, spec, jobs)
    except UserError:
        raise UserError(source, f"was imported before (sweep {sweep_id}).") from None
    for job, result in pairs:
        result_store.save_result(session, job, result, host=host, worker="llama-bench")
    sweep_store.refresh_sweep_status(session, sweep_id)
    return {
        "sweep_id": sweep_id,
        "imported": len(pairs),
        "skipped": skipped,
        "raw_samples": sum(bool(r.samples) for _, r in pairs),
    }


def import_file(url: str, path: Path, *, host: str, models_dir: Path | None = None, model: str | None = None) -> dict:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError("FILE", f"cannot read {path}: {exc.strerror}.") from None
    records = parse(data.decode(errors="replace"), source=str(path))
    sweep_id = f"llama-bench-{digest(data.hex(), 12)}"
    catalog = ModelCatalog(models_dir) if (model and models_dir) else None
    with session_scope(url) as s:
        return import_records(s, records, sweep_id=sweep_id, host=host, source=path.name, catalog=catalog, model=model)
