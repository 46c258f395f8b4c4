"""Our KL-divergence beside llama-perplexity's on the same files and windows: the comparison behind
tests/models/test_quality.py and benchmarks/kld.py."""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from pathlib import Path

from siliconbench.contract.jobs import JobSpec, expand
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.spec import parse_sweep

from harness.perplexity_tools import FA, tool_text
from siliconbench.worker.job.child import run_in_child

TARGET = 0.01
PRINTED = 5e-7  # llama-perplexity prints KLD with %10.6f
STAT = re.compile(r"^(Mean|Median|Maximum|99\.9%|99\.0%|90\.0%)\s+KLD:\s+([-\d.eE+]+)", re.M)
SAME_TOP = re.compile(r"Same top p:\s+([\d.]+) ± ([\d.]+) %")
TOOL_RETRY_S = 120.0


def agrees(ours: float, tool: float) -> bool:
    """Within TARGET, or within what the tool prints (6 decimals: 0.000019 for 1.92e-05)."""
    return abs(ours - tool) <= max(TARGET * abs(tool), PRINTED)


def kld_jobs(models_dir: Path, model: str, window: int, windows: int, quants: list[str] | None) -> list[JobSpec]:
    spec = parse_sweep(
        {
            "name": "kld-fidelity",
            "models": [model],
            "quantizations": ["all"],
            "timeout_s": 3600,
            "workloads": [{"kind": "perplexity", "kl_divergence": True, "window_tokens": window, "windows": windows}],
        }
    )
    jobs = expand(spec, ModelCatalog(models_dir))
    return [j for j in jobs if quants is None or j.quant in quants or j.quant_level == "full"]


def tool_kld(
    bin_dir: Path, base_gguf: Path, gguf: Path, text: Path, tmp: Path, *, window: int, windows: int, options: dict
) -> dict:
    """llama-perplexity --kl-divergence-base on the base, then --kl-divergence on ``gguf``: its statistics."""
    common = [
        "-c",
        str(window),
        "--chunks",
        str(windows),
        "-b",
        str(min(int(options.get("n_batch", 2048)), window)),
        "-ub",
        str(int(options.get("n_ubatch", 512))),
        "-fa",
        FA[options.get("flash_attn", "auto")],
    ]
    if options.get("threads"):
        common += ["-t", str(options["threads"]), "-tb", str(options.get("threads_batch") or options["threads"])]
    base_file = tmp / f"{base_gguf.stem}-{window}x{windows}.kld"
    exe = str(bin_dir / "llama-perplexity")
    if not base_file.exists():
        run = subprocess.run(
            [exe, "-m", str(base_gguf), "-f", str(text), *common, "--kl-divergence-base", str(base_file)],
            capture_output=True,
            text=True,
        )
        if run.returncode != 0:
            raise RuntimeError(f"llama-perplexity --kl-divergence-base failed:\n{run.stderr[-2000:]}")
    cmd = [exe, "-m", str(gguf), *common, "--kl-divergence-base", str(base_file), "--kl-divergence"]
    # llama.cpp's log thread can lose its last lines (the statistics) on a busy machine: five tries in a row lost them
    # once under make test's parallel part, so it tries for up to TOOL_RETRY_S, as load comes and goes
    deadline, tries = time.monotonic() + TOOL_RETRY_S, 0
    while tries < 5 or time.monotonic() < deadline:
        tries += 1
        run = subprocess.run(cmd, capture_output=True, text=True)
        both = run.stdout + run.stderr
        stats = {k: float(v) for k, v in STAT.findall(both)}
        top = SAME_TOP.search(both)
        if run.returncode != 0 or ("Mean" in stats and top is not None):
            break
    if run.returncode != 0 or "Mean" not in stats or top is None:
        raise RuntimeError(f"llama-perplexity --kl-divergence failed (rc {run.returncode}):\n{both[-3000:]}")
    return {
        "kld_mean": stats["Mean"],
        "kld_p99": stats.get("99.0%"),
        "same_top_pct": float(top.group(1)),
        "cmd": " ".join(cmd),
    }


def rows(
    models_dir: Path, model: str, bin_dir: Path, window: int = 512, windows: int = 4, quants: list[str] | None = None
) -> list[dict]:
    models_dir = Path(models_dir)
    jobs = kld_jobs(models_dir, model, window, windows, quants)
    # full precision first: each engine's first job makes its base, the rest read it
    jobs.sort(key=lambda j: (j.quant_level != "full", j.engine))
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        text = tool_text(Path(tmp))
        for job in jobs:
            res = run_in_child(job, models_dir)
            if res.status != "ok":
                raise RuntimeError(f"{job.label()}: {res.error}\n{res.stderr_tail or ''}")
            kld = res.extra["kld"]
            same = kld["same"]
            row = {
                "engine": job.engine,
                "quant": job.quant,
                "level": job.quant_level,
                "bits_per_weight": res.extra.get("bits_per_weight"),
                "kld_mean": same["kld_mean"],
                "kld_p99": same["kld_p99"],
                "same_top_count": same["same_top_count"],
                "positions": same["kld_positions"],
                "base": f"{same['engine']} {same['quant']}",
                "cross": kld.get("cross"),
            }
            if job.engine == "llama.cpp" and job.quant_level != "full":
                base = next(b for b in job.params["kld_bases"] if b["engine"] == "llama.cpp")
                opts = res.environment.engine_options if res.environment else {}
                tool = tool_kld(
                    bin_dir,
                    models_dir / base["artifact"],
                    models_dir / job.artifact,
                    text,
                    Path(tmp),
                    window=window,
                    windows=windows,
                    options=opts,
                )
                tool["same_top_count"] = round(tool["same_top_pct"] * same["kld_positions"] / 100)
                row["tool"] = tool
                row["ratio"] = same["kld_mean"] / tool["kld_mean"]
                row["within_target"] = (
                    agrees(same["kld_mean"], tool["kld_mean"]) and tool["same_top_count"] == same["same_top_count"]
                )
            out.append(row)
    return out
