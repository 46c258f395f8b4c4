"""siliconbench's perplexity next to the engines' own tools, on the same model files and the same text.

Called by benchmarks/fidelity.py (``perplexity_rows`` then ``print_rows``) and by the perplexity tests.

- **llama-perplexity** (built from the vendored llama.cpp by scripts/build_llama_tools.sh): run as a user runs it,
  ``llama-perplexity -m GGUF -f TEXT -c window_tokens --chunks windows``, with the threads, batch, ubatch,
  flash attention and KV types our job actually used (its recorded effective engine options). ``-b`` is
  min(n_batch, window_tokens): one window a batch, as our job evaluates it (a larger -b makes the tool run
  several windows side by side as parallel sequences; same numbers, other kernels' shapes). TEXT is the shipped
  corpus with one newline added, because ``-f`` drops one trailing newline: the tool tokenizes exactly the text
  our job tokenizes. Its ``Final estimate: PPL = …`` is the figure; our mode ``llama-perplexity`` is its
  definition (BOS first where the vocab adds it, the second half of each window scored).
- **mlx_lm.perplexity**: its CLI can only sample a Hugging Face dataset (``--data-path``, through
  mlx_lm.tuner.datasets, shuffled with a seed), not read a local text, so the same ids cannot be given to it
  that way. Instead its own scoring function, ``mlx_lm.perplexity.eval_ppl(model, data, batch_size=8)``
  (its CLI's default batch), is called in a fresh process on the model loaded by ``mlx_lm.load`` and on our
  windows (corpus tokenized by the MLX tokenizer without special tokens, ``windows`` x ``window_tokens``
  from token 0). That is our mode ``all-tokens``; the digest of the ids is compared with our job's.

Rows pair each of our (engine, mode) results with a tool. Two rows are like with like (same artifact, same
definition; target: within 0.5%): llama.cpp / llama-perplexity vs llama-perplexity, and MLX / all-tokens vs
mlx_lm eval_ppl. The other two compare across engines on the paired artifact of the same quantization level
(MLX / llama-perplexity vs llama-perplexity on the GGUF, llama.cpp / all-tokens vs eval_ppl on the MLX
directory): they also carry the weights' dtype difference (e.g. GGUF F16 vs MLX float32), so they are shown,
not held to the target.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from siliconbench.contract.jobs import JobSpec, expand  # noqa: E402
from siliconbench.contract.manifest import ModelCatalog  # noqa: E402
from siliconbench.contract.spec import parse_sweep  # noqa: E402

from siliconbench.worker.job.child import child_env, run_in_child  # noqa: E402
from siliconbench.worker.workloads.common import corpus_text  # noqa: E402

TARGET = 0.005
MODES = ("llama-perplexity", "all-tokens")
FINAL = re.compile(r"Final estimate: PPL = ([\d.]+) \+/- ([\d.]+)")
CHUNK = re.compile(r"\[(\d+)\]([\d.]+),")
FA = {"auto": "auto", "on": "on", "off": "off", True: "on", False: "off"}


def tool_text(directory: Path) -> Path:
    """The shipped corpus as llama-perplexity's -f must get it to see exactly corpus_text() (it drops one '\\n')."""
    path = directory / "corpus-for-llama-perplexity.txt"
    path.write_text(corpus_text() + "\n")
    return path


def llama_perplexity(bin_dir: Path, gguf: Path, text: Path, *, window: int, windows: int, options: dict) -> dict:
    """One run of llama-perplexity; ``options``: our job's effective llama.cpp options (threads, n_batch, …)."""
    cmd = [
        str(bin_dir / "llama-perplexity"),
        "-m",
        str(gguf),
        "-f",
        str(text),
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
        "-ctk",
        str(options.get("type_k", "f16")),
        "-ctv",
        str(options.get("type_v", "f16")),
    ]
    if options.get("threads"):
        cmd += ["-t", str(options["threads"]), "-tb", str(options.get("threads_batch") or options["threads"])]
    ngl = int(options.get("n_gpu_layers", -1))
    cmd += ["-ngl", str(999 if ngl < 0 else ngl)]
    for _attempt in range(5):  # llama.cpp's log thread can lose its last lines (chunks, the estimate) when loaded
        out = subprocess.run(cmd, capture_output=True, text=True)
        both = out.stdout + out.stderr
        m = FINAL.search(both)
        chunks = [float(v) for _, v in CHUNK.findall(both)]
        if out.returncode != 0 or m or len(chunks) == windows:
            break
    if out.returncode == 0 and not m and len(chunks) == windows:
        # llama.cpp's log is written by a thread: on a busy machine the process can exit before its last lines
        # ("Final estimate") are out. The running estimate after the last chunk is that same figure.
        return {"ppl": chunks[-1], "stderr": float("nan"), "chunks": len(chunks), "cmd": " ".join(cmd)}
    if out.returncode != 0 or not m:
        raise RuntimeError(f"llama-perplexity failed (rc {out.returncode}): {' '.join(cmd)}\n{both[-3000:]}")
    return {"ppl": float(m.group(1)), "stderr": float(m.group(2)), "chunks": len(chunks), "cmd": " ".join(cmd)}


_EVAL_PPL = r"""
import hashlib, json, sys
import mlx.core as mx
from mlx_lm import load
from mlx_lm.perplexity import eval_ppl
sys.path.insert(0, {root!r})
from siliconbench.worker.workloads.common import corpus_text
from siliconbench.worker.workloads.perplexity import windows_of
model, tokenizer = load({path!r})
ids = list(tokenizer.encode(corpus_text(), add_special_tokens=False))
chunks = windows_of(ids, {window}, {windows}, 0)
ppl, se = eval_ppl(model, mx.array(chunks), batch_size={batch})
used = [t for c in chunks for t in c]
print("RESULT " + json.dumps({{"ppl": ppl, "stderr": se, "scored_tokens": len(chunks) * ({window} - 1),
      "tokens_sha256": hashlib.sha256(json.dumps(used).encode()).hexdigest()}}))
"""


def mlx_eval_ppl(model_dir: Path, *, window: int, windows: int, env: dict[str, str], batch: int = 8) -> dict:
    """mlx_lm.perplexity's eval_ppl on our all-tokens windows, in a fresh process with our job's environment."""
    code = _EVAL_PPL.format(root=str(ROOT), path=str(model_dir), window=window, windows=windows, batch=batch)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if out.returncode != 0 or line is None:
        raise RuntimeError(f"mlx_lm eval_ppl failed (rc {out.returncode}):\n{(out.stdout + out.stderr)[-3000:]}")
    return {
        **json.loads(line.removeprefix("RESULT ")),
        "cmd": f"mlx_lm.perplexity.eval_ppl(load({model_dir}), {windows}x{window} ids, batch_size={batch})",
    }


def perplexity_jobs(
    models_dir: Path, model: str, *, window_tokens: int, windows: int, quant: str = "full", threads: int | None = None
) -> list[JobSpec]:
    """Our perplexity jobs, both modes on both engines, expanded from a sweep as a user's sweep would be."""
    spec = parse_sweep(
        {
            "name": "fidelity-perplexity",
            "models": [model],
            "quantizations": [quant],
            "engine_options": {"threads": threads},
            "timeout_s": 1800,
            "workloads": [
                {"kind": "perplexity", "mode": m, "window_tokens": window_tokens, "windows": windows} for m in MODES
            ],
        }
    )
    return expand(spec, ModelCatalog(models_dir))


def _ours(job: JobSpec, models_dir: Path) -> dict:
    res = run_in_child(job, models_dir)
    if res.status != "ok":
        raise RuntimeError(f"{job.label()} mode={job.params['mode']}: {res.error}\n{res.stderr_tail or ''}")
    (ppl,) = res.measured("perplexity")
    return {"ppl": ppl, "extra": res.extra, "options": res.environment.engine_options if res.environment else {}}


def perplexity_rows(
    models_dir: Path,
    model: str,
    tools_bin: Path,
    window_tokens: int = 512,
    windows: int = 4,
    quant: str = "full",
    threads: int | None = None,
) -> list[dict]:
    """One row per (engine, mode) of ours, each beside the tool that defines or computes that mode."""
    models_dir = Path(models_dir)
    jobs = perplexity_jobs(
        models_dir, model, window_tokens=window_tokens, windows=windows, quant=quant, threads=threads
    )
    ours = {(j.engine, j.params["mode"]): (j, _ours(j, models_dir)) for j in jobs}
    tools: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        text = tool_text(Path(tmp))
        gguf_job = next((j for (e, m), (j, _) in ours.items() if e == "llama.cpp" and m == "llama-perplexity"), None)
        mlx_job = next((j for (e, m), (j, _) in ours.items() if e == "mlx" and m == "all-tokens"), None)
        if gguf_job is not None:
            opts = ours[("llama.cpp", "llama-perplexity")][1]["options"]
            tools["llama-perplexity"] = {
                **llama_perplexity(
                    tools_bin, models_dir / gguf_job.artifact, text, window=window_tokens, windows=windows, options=opts
                ),
                "artifact": gguf_job.artifact,
                "quant": gguf_job.quant,
            }
        if mlx_job is not None:
            tools["mlx_lm.perplexity"] = {
                **mlx_eval_ppl(
                    models_dir / mlx_job.artifact,
                    window=window_tokens,
                    windows=windows,
                    env=child_env(mlx_job, models_dir),
                ),
                "artifact": mlx_job.artifact,
                "quant": mlx_job.quant,
            }
    rows = []
    for (engine, mode), (job, res) in sorted(ours.items()):
        tool_name = "llama-perplexity" if mode == "llama-perplexity" else "mlx_lm.perplexity"
        tool = tools.get(tool_name)
        if tool is None:
            continue
        same = tool["artifact"] == job.artifact
        row = {
            "model": model,
            "engine": engine,
            "quant": job.quant,
            "mode": mode,
            "siliconbench": res["ppl"],
            "scored_tokens": res["extra"]["scored_tokens"],
            "tool": tool_name,
            "tool_quant": tool["quant"],
            "tool_value": tool["ppl"],
            "ratio": res["ppl"] / tool["ppl"],
            "same_artifact": same,
            "within_target": abs(res["ppl"] / tool["ppl"] - 1) <= TARGET if same else None,
            "tool_cmd": tool["cmd"],
        }
        if "tokens_sha256" in tool:
            row["same_ids"] = tool["tokens_sha256"] == res["extra"]["tokens_sha256"]
        rows.append(row)
    return rows


def print_rows(console, rows: list[dict]) -> None:
    from rich.table import Table

    t = Table(
        title="perplexity: siliconbench ÷ the tools, same text (target ±0.5% where the artifact is the same)",
        title_justify="left",
    )
    for c in ("model", "engine", "mode", "siliconbench", "tool", "tool value", "ratio", "same artifact", "within 0.5%"):
        t.add_column(c, justify="right" if c in ("siliconbench", "tool value", "ratio") else "left")
    for r in rows:
        tool = r["tool"] + ("" if r["same_artifact"] else f" ({r['tool_quant']})")
        ok = "—" if r["within_target"] is None else ("yes" if r["within_target"] else "NO")
        same = "yes" if r["same_artifact"] else "no (cross-engine)"
        t.add_row(
            r["model"],
            f"{r['engine']} {r['quant']}",
            r["mode"],
            f"{r['siliconbench']:.4f}",
            tool,
            f"{r['tool_value']:.4f}",
            f"{r['ratio']:.5f}",
            same,
            ok,
        )
    console.print(t)
    for cmd in dict.fromkeys(r["tool_cmd"] for r in rows):
        console.print(f"[dim]{cmd}[/dim]")


if __name__ == "__main__":  # python harness/perplexity_tools.py MODEL [WINDOW] [WINDOWS]
    from rich.console import Console

    from siliconbench.contract.settings import load_settings

    from harness import tools as _tools

    args = sys.argv[1:]
    found = perplexity_rows(
        load_settings().resolved_models_dir,
        args[0],
        _tools.llama_tools_bin(),
        window_tokens=int(args[1]) if len(args) > 1 else 512,
        windows=int(args[2]) if len(args) > 2 else 4,
    )
    print_rows(Console(width=200), found)
    print(json.dumps(found, indent=1))
