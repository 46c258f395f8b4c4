"""The memory-bandwidth bound beside every decode result: what share of the host's bandwidth a decode step used.

A decode step reads every weight once and the KV cache up to its position, so tokens/s can be at most
bandwidth / bytes-per-token. ``decode_bandwidth_pct`` (siliconbench.contract.metrics) is decode_tps x bytes-per-token
/ bandwidth, per repetition. The bandwidth is the chip's published figure where this table knows the chip
(the sources below), else the probe measured on this host; both are recorded with the result.

Bytes per token: every weight tensor a decode step reads, from the files' tensor tables (GGUF header, or the
MLX directory's safetensors headers): all of them, except that an input embedding table with a separate output
matrix is looked up one row at a time (tied embeddings are read whole, by the output projection), and that a
mixture of experts' routed experts count experts_used / experts of their bytes (a token reads only its own; the
counts from the files: GGUF ``<arch>.expert_count``/``expert_used_count``, config.json ``num_experts_per_tok``...);
plus K and V of every layer at the mean decode position (depth + prompt + (gen - 1) / 2) in the KV cache's dtype.

The probe measures what decode does: streaming reads (a SIMD max-reduction over bytes, numpy's fastest read
kernel here) of a buffer far larger than the last-level cache, split over the threads the engines use, best of
several. It is cached for a day only when the machine was quiet while it ran (other processes used under
BUSY_CPU_PCT of the CPU); a figure that a decode exceeds is "bound exceeded" in the result (the weights fit a
cache, or the probe is wrong) and the cache is dropped, so the next job probes again. A probe that found the machine
busy is not tried again for BUSY_RETRY_S: its figure is never used, and on a machine that stays busy every job's
parent would pay seconds and a sweep of memory bandwidth beside the other processes
(docs/evidence/house-fifth-floor-2026-12-06/figures-moved-from-code.md).
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from itertools import pairwise
from pathlib import Path

from siliconbench.contract.manifest import ModelManifest
from siliconbench.contract.settings import data_dir

from siliconbench.worker.measure.busy import CpuMark
from siliconbench.worker.models.facts import (
    EXPERT_COUNT_KEYS,
    EXPERT_USED_KEYS,
    read_gguf_header,
    safetensors_header,
    split_parts,
)
from siliconbench.worker.platform.locks import exclusive
from siliconbench.worker.platform.threads import performance_cores

# Apple's unified-memory bandwidth in GB/s (1e9 bytes/s), by chip and, where binned parts differ, GPU cores.
# Sources: M1 Pro 200 / M1 Max 400: macrumors.com/2022/10/24/macbook-pro-very-high-bandwidth-ram-rumor;
# M2 Pro 200, M2 Max 400, M3 Pro 150, M3 Max 300 (30-core GPU) / 400 (40-core GPU):
# macrumors.com/2023/10/31/apple-m3-pro-less-memory-bandwidth; M4 120, M4 Pro 273: mactrast.com/?p=168123
# (Apple's M4 Pro/M4 Max announcement); M4 Max 546 (40-core GPU): macrumors.com/2024/10/30/apple-announces-m4-max-chip.
# Chips without a sourced figure here (M1, M2, M3, the Ultras, the 32-core M4 Max) use the measured probe.
PUBLISHED_GBS: dict[tuple[str, int | None], float] = {
    ("Apple M1 Pro", None): 200,
    ("Apple M1 Max", None): 400,
    ("Apple M2 Pro", None): 200,
    ("Apple M2 Max", None): 400,
    ("Apple M3 Pro", None): 150,
    ("Apple M3 Max", 30): 300,
    ("Apple M3 Max", 40): 400,
    ("Apple M4", None): 120,
    ("Apple M4 Pro", None): 273,
    ("Apple M4 Max", 40): 546,
}
KV_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "q8_0": 34 / 32, "q4_0": 18 / 32}
PROBE_BYTES = 512 << 20  # 16x this VM's 32 MiB L3, 1/8 of an M-series Max's 48 MiB SLC x 100
PROBE_MAX_AGE_S = 24 * 3600
PROBE_REPEATS = 7
BUSY_CPU_PCT = 20.0  # other processes' share of all cores while probing, above which the figure is not cached
BUSY_RETRY_S = 600.0  # after a busy probe, the next is not before this (a busy machine rarely turns quiet sooner)


def published_gbs(chip: str | None, gpu_cores: int | None) -> float | None:
    return PUBLISHED_GBS.get((chip or "", gpu_cores)) or PUBLISHED_GBS.get((chip or "", None))


def measure_gbs(threads: int | None = None, repeats: int = PROBE_REPEATS) -> float:
    """Best of ``repeats`` parallel streaming reads of PROBE_BYTES (one slice a thread; numpy drops the GIL in
    its reductions), counted as bytes read: what decode does to its weights."""
    import numpy as np  # here: the worker process imports this module, and needs numpy only for the probe

    n = threads or performance_cores()
    buf = np.ones(PROBE_BYTES, dtype=np.uint8)
    bounds = np.linspace(0, buf.size, n + 1, dtype=np.int64)
    slices = [buf[a:b] for a, b in pairwise(bounds)]
    best = float("inf")
    for _ in range(repeats):
        workers = [threading.Thread(target=np.max, args=(part,)) for part in slices]
        t0 = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        best = min(best, time.perf_counter() - t0)
    return buf.nbytes / best / 1e9


def cache_path() -> Path:
    return data_dir() / "bandwidth.json"


def probed_gbs(cache: Path | None = None, measure: bool = True) -> dict:
    """This host's measured bandwidth, from a cache of at most a day (the worker reads it at start, and the
    parent of each job before it starts the child; either probes when there is none). ``measure=False`` (the
    job's own process: the probe's 512 MiB would count in its memory peak) only reads the cache: {} when there
    is none. A probe taken while other processes used over BUSY_CPU_PCT of the cores is returned (marked busy)
    but not cached, and only its time is kept: until BUSY_RETRY_S later, {} without probing.

    One probe at a time on a host: processes that find no figure together (workers started at once, a worker and a
    dashboard runner) would each hold PROBE_BYTES and read each other's traffic as the bandwidth (40 workers started
    together on a fresh machine held 20 GiB and were killed for memory). The later ones wait for the first and take
    what it left: its figure, or its busy mark."""
    cache = cache or cache_path()
    rec = _read(cache)
    if _fresh(rec):
        return rec
    if not measure or _waiting_after_busy(rec):
        return {}  # without the lock: a job's parent on a busy host never queues behind a probe
    with exclusive(cache.with_name(f"{cache.name}.lock")):  # held while probing
        rec = _read(cache)  # what the probe this one waited for left
        if _fresh(rec):
            return rec
        if _waiting_after_busy(rec):
            return {}
        start = CpuMark.now()
        gbs = measure_gbs()
        others = CpuMark.now().since(start)["others_cpu_pct"]
        now = time.time()
        new = {
            "measured_gbs": round(gbs, 2),
            "method": "read",
            "threads": performance_cores(),
            "others_cpu_pct": round(others, 1),
            "measured_at": now,
        }
        if others > BUSY_CPU_PCT:
            # The figure stays out (a stale quiet one is kept, unused past its day): only when to try again.
            _write(cache, {**rec, "busy_at": now})
            return {**new, "busy": True}
        _write(cache, new)
        return new


def _read(cache: Path) -> dict:
    try:
        return json.loads(cache.read_text())
    except (OSError, ValueError):
        return {}


def _fresh(rec: dict) -> bool:
    return rec.get("method") == "read" and time.time() - rec.get("measured_at", 0) < PROBE_MAX_AGE_S


def _waiting_after_busy(rec: dict) -> bool:
    return time.time() - rec.get("busy_at", 0) < BUSY_RETRY_S


def _write(cache: Path, rec: dict) -> None:
    """Whole or not at all: the workers and job parents of one host share the file."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    part = cache.with_name(f"{cache.name}.{os.getpid()}.part")
    part.write_text(json.dumps(rec))
    os.replace(part, cache)


def forget_probe(cache: Path | None = None) -> None:
    """Drop the cached probe (a decode exceeded it): the next job's parent measures again."""
    (cache or cache_path()).unlink(missing_ok=True)


def weight_bytes(artifact: Path) -> int:
    """Bytes of weights one decode step reads (module docstring); the files' size where no table is readable."""
    return weights_read(artifact)["bytes"]


def weights_read(artifact: Path) -> dict:
    """What one decode step reads of the weights: ``bytes``, and for a mixture of experts ``experts`` (how many, how
    many a token is routed to, and the routed experts' bytes in the files): a token reads the shared tensors and
    only its experts, so the routed tensors count experts_used / experts of their bytes."""
    try:
        sizes = _tensor_bytes(artifact)
    except Exception:  # an unreadable table: the files' size, an upper bound
        sizes = {}
    if not sizes:
        files = [artifact] if artifact.is_file() else sorted(artifact.glob("*.safetensors"))
        return {"bytes": sum(f.stat().st_size for f in files)}
    for embed, output in (("token_embd.weight", "output.weight"), ("model.embed_tokens.weight", "lm_head.weight")):
        if embed in sizes and output in sizes:  # untied: one row of the input table per token
            sizes[embed] = sizes[embed] // max(sizes.get(f"{embed}#rows", 1), 1)
    sizes = {k: v for k, v in sizes.items() if not k.endswith("#rows")}
    routed = sum(v for k, v in sizes.items() if is_routed_expert(k))
    # the counts only where the tensor table has routed experts: a dense model's job reads no header twice
    experts = expert_counts(artifact) if routed else None
    if not experts:
        return {"bytes": sum(sizes.values())}
    count, used = experts
    active = routed * used / count
    return {
        "bytes": round(sum(sizes.values()) - routed + active),
        "experts": {"count": count, "used": used, "routed_bytes": routed, "routed_bytes_read": round(active)},
    }


def is_routed_expert(name: str) -> bool:
    """A routed expert's tensor: llama.cpp's stacked ``blk.N.ffn_*_exps``, mlx-lm's stacked ``switch_mlp``, Hugging
    Face's ``experts.K.*`` (or gpt-oss's stacked ``experts.*``); never a shared expert (``shexp``,
    ``shared_expert(s)``) or the router (``ffn_gate_inp``, ``mlp.gate``), which every token reads."""
    return "_exps." in name or ".switch_mlp." in name or ".experts." in name


def expert_counts(artifact: Path) -> tuple[int, int] | None:
    """(experts, experts used per token) as the files declare them: GGUF ``<arch>.expert_count`` and
    ``<arch>.expert_used_count``; a folder's config.json (or its text_config). None for a dense model."""
    if artifact.is_file():
        kv = read_gguf_header(artifact).kv
        arch = kv.get("general.architecture")
        count, used = kv.get(f"{arch}.expert_count"), kv.get(f"{arch}.expert_used_count")
    else:
        try:
            cfg = json.loads((artifact / "config.json").read_text())
        except (OSError, ValueError):
            return None
        cfg = {**cfg, **(cfg.get("text_config") or {})}
        count = next((cfg[k] for k in EXPERT_COUNT_KEYS if cfg.get(k)), None)
        used = next((cfg[k] for k in EXPERT_USED_KEYS if cfg.get(k)), None)
    if not count or not used or int(count) <= 1:
        return None
    return int(count), int(used)


def _tensor_bytes(artifact: Path) -> dict[str, int]:
    """Each tensor's bytes (and each embedding table's row count under '<name>#rows'), from the file headers;
    an MLX quantized tensor counts with its scales and biases."""
    import gguf  # the models extra's table of quant block sizes

    out: dict[str, int] = {}
    if artifact.is_file():
        for part in split_parts(artifact):
            for name, shape, ttype in read_gguf_header(part).tensors:
                block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(ttype)]
                n = int(math.prod(shape))
                out[name] = n // block * size
                if name == "token_embd.weight":
                    out[f"{name}#rows"] = int(shape[-1])
        return out
    for f in sorted(artifact.glob("*.safetensors")):
        for name, t in safetensors_header(f).items():
            if name == "__metadata__":
                continue
            a, b = t["data_offsets"]
            base = name.removesuffix(".scales").removesuffix(".biases")
            key = base + ".weight" if base != name and not base.endswith(".weight") else base
            out[key] = out.get(key, 0) + (b - a)
            if name == "model.embed_tokens.weight" and t["shape"]:
                out[f"{name}#rows"] = int(t["shape"][0])
    return out


def kv_bytes_per_token(m: ModelManifest, position: float, kv_dtype: str) -> float:
    """K and V of every layer for ``position`` cached tokens, in the cache's dtype."""
    per_value = KV_BYTES.get(kv_dtype.split("/")[0].lower(), 2)
    return 2 * m.n_layers * m.n_kv_heads * m.head_size * position * per_value


def bound(
    manifest: ModelManifest,
    artifact: Path,
    n_depth: int,
    n_prompt: int,
    n_gen: int,
    kv_dtype: str,
    chip: str | None,
    gpu_cores: int | None,
    gpu: dict | None = None,
) -> dict:
    """The roofline record of a decode job: bytes per token, the bandwidth used and where it came from.

    ``gpu``: where the engine ran on a discrete GPU (a CUDA backend), its NVML facts: the weights stream from the
    device's own memory, so its datasheet bandwidth (else the bus-derived one) is the bound, never the host's."""
    read = weights_read(artifact)
    weights = read["bytes"]
    kv = kv_bytes_per_token(manifest, n_depth + n_prompt + (n_gen - 1) / 2, kv_dtype)
    moe = {"experts": read["experts"]} if "experts" in read else {}
    if gpu:
        return gpu_record(gpu, weights, kv) | moe
    published = published_gbs(chip, gpu_cores)
    probe = probed_gbs(measure=False)
    gbs = published or probe.get("measured_gbs")
    if not gbs:
        return {"weights_bytes": weights, "kv_bytes_per_token": round(kv), "bytes_per_token": round(weights + kv)} | moe
    return moe | {
        "weights_bytes": weights,
        "kv_bytes_per_token": round(kv),
        "bytes_per_token": round(weights + kv),
        "bandwidth_gbs": gbs,
        "bandwidth_source": "published" if published else "measured",
        "published_gbs": published,
        "measured_gbs": probe.get("measured_gbs"),
        "probe_method": probe.get("method"),
        "bound_tps": round(gbs * 1e9 / (weights + kv), 2),
    }


def gpu_record(gpu: dict, weights: int, kv: float) -> dict:
    """The roofline record against a discrete GPU's own memory (NVML facts: siliconbench/worker/platform/nvidia.py)."""
    record = {"weights_bytes": weights, "kv_bytes_per_token": round(kv), "bytes_per_token": round(weights + kv)}
    gbs = gpu.get("bandwidth_datasheet_gbs") or gpu.get("bandwidth_theoretical_gbs")
    if gbs:
        source = "datasheet" if gpu.get("bandwidth_datasheet_gbs") else "bus width x memory clock"
        record |= {
            "bandwidth_gbs": gbs,
            "bandwidth_source": f"{gpu.get('name')} {source}",
            "bound_tps": round(gbs * 1e9 / (weights + kv), 2),
        }
    return record


def bandwidth_pct(decode_tps: float, record: dict) -> float | None:
    """None when no bandwidth is known (no published figure and no probe yet): not recorded, never guessed."""
    if not record.get("bandwidth_gbs"):
        return None
    return 100.0 * decode_tps * record["bytes_per_token"] / (record["bandwidth_gbs"] * 1e9)


def mark_exceeded(record: dict, pcts: list[float]) -> None:
    """A decode above the bound: say so in the record (the weights fit a cache, or the probe is wrong) and, for a
    measured bound, drop the cached probe so the next job measures again."""
    worst = max(pcts, default=0.0)
    if worst > 100.0:
        record["exceeded"] = True
        record["max_pct"] = round(worst, 1)
        if record.get("bandwidth_source") == "measured":
            forget_probe()
