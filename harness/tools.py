"""The engines' own benchmark tools, run as a user runs them: llama-bench (built from the vendored llama.cpp by
scripts/build_llama_tools.sh) and mlx_lm.benchmark (the installed mlx-lm). Each call is one fresh process and
returns that process's raw repetitions, so benchmarks/fidelity.py can treat it exactly like one siliconbench job.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from siliconbench.contract.settings import load_settings

ROOT = Path(__file__).resolve().parent.parent
TRIAL = re.compile(r"Trial \d+:\s+prompt_tps=([\d.]+), generation_tps=([\d.]+)")


def llama_tools_bin() -> Path:
    """The folder holding llama-bench and llama-perplexity: SILICONBENCH_LLAMA_TOOLS_DIR where set (a CUDA build on
    a GPU host: scripts/gpu/), else built on first use by scripts/build_llama_tools.sh (~7 min, then cached)."""
    configured = load_settings().llama_tools_dir
    if configured:
        return configured
    out = subprocess.run(
        [str(ROOT / "scripts/build_llama_tools.sh")],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    return Path(out.stdout.strip().splitlines()[-1])


def llama_bench(
    bin_dir: Path,
    gguf: Path,
    *,
    n_prompt: int,
    n_gen: int,
    depth: int,
    reps: int,
    threads: int | None = None,
    flash_attn: str = "auto",
) -> list[float]:
    """samples_ts of one llama-bench test: pp<n_prompt> @ d<depth> when n_gen is 0, else tg<n_gen> @ d<depth>.

    llama-bench's own defaults otherwise (-b 2048 -ub 512 -ngl 99 -ctk/-ctv f16 -mmp 1, a warmup run)."""
    cmd = [
        str(bin_dir / "llama-bench"),
        "-m",
        str(gguf),
        "-p",
        str(n_prompt),
        "-n",
        str(n_gen),
        "-d",
        str(depth),
        "-r",
        str(reps),
        "-fa",
        {"auto": "auto", "on": "1", "off": "0"}[flash_attn],
        "-o",
        "json",
    ]
    if threads:
        cmd += ["-t", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    records = json.loads(out.stdout)
    (test,) = [r for r in records if (r["n_gen"] if n_gen else r["n_prompt"])]
    return [float(x) for x in test["samples_ts"]]


def mlx_benchmark(
    model_dir: Path, *, n_prompt: int, n_gen: int, reps: int, env: dict[str, str]
) -> dict[str, list[float]]:
    """prompt_tps and generation_tps of each trial of `python -m mlx_lm.benchmark` (it runs one warmup first).

    mlx_lm's generation_tps divides -g tokens by the time after the first token, which covers -g - 1 decode
    steps; ``decode_steps_tps`` converts it to decode steps per second, siliconbench's decode_tps region."""
    cmd = [
        sys.executable,
        "-m",
        "mlx_lm.benchmark",
        "--model",
        str(model_dir),
        "-p",
        str(n_prompt),
        "-g",
        str(n_gen),
        "-n",
        str(reps),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    trials = [(float(a), float(b)) for a, b in TRIAL.findall(out.stdout)]
    if len(trials) != reps:
        raise RuntimeError(f"mlx_lm.benchmark printed {len(trials)} trials, expected {reps}:\n{out.stdout[-2000:]}")
    return {
        "prompt_tps": [a for a, _ in trials],
        "generation_tps": [b for _, b in trials],
        "decode_steps_tps": [b * (n_gen - 1) / n_gen for _, b in trials],
    }
