"""The memory-bandwidth bound beside every decode result: what share of the host's bandwidth a decode step used.

A decode step reads every weight once and the KV cache up to its position, so tokens/s can be at most
bandwidth / bytes-per-token. ``decode_bandwidth_pct`` (siliconbench.metrics) is decode_tps x bytes-per-token
/ bandwidth, per repetition. The bandwidth is the chip's published figure where this table knows the chip
(the sources below), else the probe measured on this host; both are recorded with the result.

Bytes per token: the weight files' size (GGUF file, or the MLX directory's safetensors), an upper bound
(the token-embedding lookup reads one row of its table), plus K and V of every layer at the mean decode
position (depth + prompt + (gen - 1) / 2) in the KV cache's dtype.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np

from siliconbench.manifest import ModelManifest
from siliconbench.settings import data_dir

from .host import performance_cores

# Apple's unified-memory bandwidth in GB/s (1e9 bytes/s), by chip and, where binned parts differ, GPU cores.
# Sources: M1 Pro 200 / M1 Max 400: macrumors.com/2022/10/24/macbook-pro-very-high-bandwidth-ram-rumor;
# M2 Pro 200, M2 Max 400, M3 Pro 150, M3 Max 300 (30-core GPU) / 400 (40-core GPU):
# macrumors.com/2023/10/31/apple-m3-pro-less-memory-bandwidth; M4 120, M4 Pro 273: mactrast.com/?p=168123
# (Apple's M4 Pro/M4 Max announcement); M4 Max 546 (40-core GPU): macrumors.com/2024/10/30/apple-announces-m4-max-chip.
# Chips without a sourced figure here (M1, M2, M3, the Ultras, the 32-core M4 Max) use the measured probe.
PUBLISHED_GBS: dict[tuple[str, int | None], float] = {
    ("Apple M1 Pro", None): 200, ("Apple M1 Max", None): 400,
    ("Apple M2 Pro", None): 200, ("Apple M2 Max", None): 400,
    ("Apple M3 Pro", None): 150, ("Apple M3 Max", 30): 300, ("Apple M3 Max", 40): 400,
    ("Apple M4", None): 120, ("Apple M4 Pro", None): 273, ("Apple M4 Max", 40): 546,
}
KV_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "q8_0": 34 / 32, "q4_0": 18 / 32}
PROBE_BYTES = 256 << 20
PROBE_MAX_AGE_S = 24 * 3600


def published_gbs(chip: str | None, gpu_cores: int | None) -> float | None:
    return PUBLISHED_GBS.get((chip or "", gpu_cores)) or PUBLISHED_GBS.get((chip or "", None))


def measure_gbs(threads: int | None = None, repeats: int = 5) -> float:
    """Best of ``repeats`` parallel copies of PROBE_BYTES (one slice a thread; numpy drops the GIL for it),
    counted as read + write: a STREAM-copy-like figure of what the cores together can move."""
    n = threads or performance_cores()
    src = np.ones(PROBE_BYTES // 8, dtype=np.float64)
    dst = np.empty_like(src)
    parts = np.array_split(np.arange(src.size), n)
    best = float("inf")
    for _ in range(repeats):
        workers = [threading.Thread(target=np.copyto, args=(dst[p[0]:p[-1] + 1], src[p[0]:p[-1] + 1])) for p in parts]
        t0 = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / best / 1e9


def probed_gbs(cache: Path | None = None, refresh: bool = False, measure: bool = True) -> dict:
    """This host's measured bandwidth, from a cache of at most a day (the worker probes at start, and the
    parent of each job before it starts the child). ``measure=False`` (the job's own process: the probe's
    512 MiB would count in its memory peak) only reads the cache: {} when there is none."""
    cache = cache or data_dir() / "bandwidth.json"
    try:
        rec = json.loads(cache.read_text())
        if not refresh and time.time() - rec["measured_at"] < PROBE_MAX_AGE_S:
            return rec
    except (OSError, ValueError, KeyError):
        pass
    if not measure:
        return {}
    rec = {"measured_gbs": round(measure_gbs(), 2), "threads": performance_cores(), "measured_at": time.time()}
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(rec))
    return rec


def weight_bytes(artifact: Path) -> int:
    files = [artifact] if artifact.is_file() else sorted(artifact.glob("*.safetensors"))
    return sum(f.stat().st_size for f in files)


def kv_bytes_per_token(m: ModelManifest, position: float, kv_dtype: str) -> float:
    """K and V of every layer for ``position`` cached tokens, in the cache's dtype."""
    per_value = KV_BYTES.get(kv_dtype.split("/")[0].lower(), 2)
    return 2 * m.n_layers * m.n_kv_heads * (m.hidden_size // m.n_heads) * position * per_value


def bound(manifest: ModelManifest, artifact: Path, n_depth: int, n_prompt: int, n_gen: int, kv_dtype: str,
          chip: str | None, gpu_cores: int | None) -> dict:
    """The roofline record of a decode job: bytes per token, the bandwidth used and where it came from."""
    weights = weight_bytes(artifact)
    kv = kv_bytes_per_token(manifest, n_depth + n_prompt + (n_gen - 1) / 2, kv_dtype)
    published = published_gbs(chip, gpu_cores)
    probe = probed_gbs(measure=False)
    gbs = published or probe.get("measured_gbs")
    if not gbs:
        return {"weights_bytes": weights, "kv_bytes_per_token": round(kv), "bytes_per_token": round(weights + kv)}
    return {"weights_bytes": weights, "kv_bytes_per_token": round(kv), "bytes_per_token": round(weights + kv),
            "bandwidth_gbs": gbs, "bandwidth_source": "published" if published else "measured",
            "published_gbs": published, "measured_gbs": probe.get("measured_gbs"),
            "bound_tps": round(gbs * 1e9 / (weights + kv), 2)}


def bandwidth_pct(decode_tps: float, record: dict) -> float | None:
    """None when no bandwidth is known (no published figure and no probe yet): not recorded, never guessed."""
    if not record.get("bandwidth_gbs"):
        return None
    return 100.0 * decode_tps * record["bytes_per_token"] / (record["bandwidth_gbs"] * 1e9)
