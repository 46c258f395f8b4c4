"""Peak memory of `models add --convert` (siliconbench/worker/models/quants/convert.py) on a checkpoint made here.

A Hugging Face folder of a published shape (models make-synthetic's shapes and weights, written in ``--dtype``) is
converted to GGUF in a fresh child process, which reports its own peak RSS (Linux VmHWM; macOS ru_maxrss). Printed beside
the checkpoint's size, its largest tensor and the issue's baseline: the converter that materialised every tensor
as float32 and held a converted copy of each until the write needed about 6 bytes a parameter (45-50 GB for a
7-8B model). The target: about the largest tensor plus the writer's buffer.

    python benchmarks/convert_memory.py --shape llama-3.2-1b      # the figure (2.5 GB of bf16 written first)
    python benchmarks/convert_memory.py --shape small              # the smoke run
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from siliconbench.worker.models.make import formats, synthetic  # noqa: E402

SMALL = {
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 768,
    "vocab_size": 4096,
    "rope_theta": 10000.0,
    "max_position_embeddings": 2048,
}
CHILD = """
import json, resource, sys, time
from pathlib import Path
import gguf, psutil, tokenizers
from siliconbench.worker.models.quants.convert import convert_to_gguf
base = psutil.Process().memory_info().rss
t = time.perf_counter()
convert_to_gguf(Path(sys.argv[1]), Path(sys.argv[2]), name="bench")
seconds = time.perf_counter() - t
try:  # this process's own high-water mark (ru_maxrss would report the parent's where it was higher at fork)
    hwm = next(int(x.split()[1]) * 1024 for x in open("/proc/self/status") if x.startswith("VmHWM:"))
except OSError:  # macOS: ru_maxrss in bytes
    hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"peak_rss_bytes": hwm, "imports_rss_bytes": base, "seconds": seconds}))
"""


def make_checkpoint(shape: str, dtype: str, out: Path) -> tuple[int, int]:
    """Write the folder; (parameters, the largest tensor's parameters)."""
    if shape == "small":
        synthetic.SHAPES["small"] = SMALL
    vocab = synthetic.padded_vocab(synthetic.SHAPES[shape]["vocab_size"])
    config = synthetic.shape_config(shape, vocab)
    weights = synthetic.weights(config, seed=0)
    params, largest = formats.count_params(weights), max(w.size for w in weights.values())
    formats.write_hf_dir(out, config, weights, vocab, dtype=dtype)
    return params, largest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="llama-3.2-1b", help=f"small, or one of {', '.join(synthetic.SHAPES)}")
    ap.add_argument("--dtype", default="bf16", choices=["f32", "f16", "bf16"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sb-convert-") as tmp:
        folder = Path(tmp) / "hf"
        t = time.perf_counter()
        params, largest = make_checkpoint(args.shape, args.dtype, folder)
        made_s = time.perf_counter() - t
        size = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(folder), str(Path(tmp) / "out.gguf")],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        if out.returncode != 0:
            sys.exit(f"the converter failed:\n{out.stderr[-3000:]}")
        got = json.loads(out.stdout.strip().splitlines()[-1])
        gguf_bytes = (Path(tmp) / "out.gguf").stat().st_size
    peak, base = got["peak_rss_bytes"], got["imports_rss_bytes"]
    print(
        f"checkpoint: {args.shape}, {params:,} parameters in {args.dtype} ({size / 2**30:,.2f} GiB, made in {made_s:.0f} s)"
    )
    print(f"largest tensor: {largest:,} parameters ({4 * largest / 2**30:,.2f} GiB as float32)")
    print(f"converted in {got['seconds']:.1f} s to a {gguf_bytes / 2**30:,.2f} GiB GGUF")
    print(f"peak RSS of the converter: {peak / 2**30:,.2f} GiB = {peak / params:.2f} bytes/parameter")
    own = peak - base
    print(
        f"above its imports ({base / 2**30:,.2f} GiB): {own / 2**30:,.2f} GiB = {own / params:.2f} bytes/parameter, "
        f"{own / (4 * largest):.2f}x the largest tensor as float32"
    )
    print(f"issue's baseline: about 6 bytes/parameter = {6 * params / 2**30:,.2f} GiB for this checkpoint")


if __name__ == "__main__":
    main()
