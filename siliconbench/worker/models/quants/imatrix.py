"""Importance matrices for llama.cpp's lowest-bit types, and quantizing with one.

llama.cpp refuses IQ1_*, IQ2_* and Q2_K_S without an importance matrix (tools/quantize, src/llama-quant.cpp). One
is computed here with llama.cpp's own ``llama-imatrix`` from the model's full-precision GGUF on the calibration
text the project ships, or taken from the user's ``--imatrix FILE``; quantizing with it goes through
``llama-quantize --imatrix`` (the Python binding takes the matrix only as raw arrays). The calibration text is the
second half of the shipped corpus, so it never overlaps the first windows that perplexity and KL-divergence
score (offset 0). Either way the matrix's digest and source are written on every artifact made with it.
"""

from __future__ import annotations

import hashlib
import subprocess
from importlib.metadata import version
from pathlib import Path

from siliconbench.contract.errors import EngineError, UserError
from siliconbench.contract.manifest import sha256_path
from siliconbench.contract.settings import llama_tools_dir

from siliconbench.worker.models.make.tokenizer import CORPUS_PATH

CALIBRATION_CHUNK_TOKENS = 512


def tools_dir() -> Path:
    """Where llama.cpp's own tools are: the setting, else where scripts/build_llama_tools.sh builds them (its
    SILICONBENCH_TOOLS_CACHE, default ~/.cache/siliconbench/tools). The one answer for the worker, the tests and
    the benchmarks."""
    return llama_tools_dir(version("llama-cpp-python"))  # the tools built with the engine's own vendored llama.cpp


def tool(name: str, option: str) -> Path:
    path = tools_dir() / name
    if not path.is_file():
        raise UserError(
            option,
            f"{name} is not built at {path}: run scripts/build_llama_tools.sh (the bootstrap "
            "does), or point SILICONBENCH_LLAMA_TOOLS_DIR at a llama.cpp build's bin folder.",
        )
    return path


def calibration_text() -> tuple[str, dict]:
    """The shipped calibration text (the corpus from its middle paragraph on) and how to name it."""
    corpus = CORPUS_PATH.read_text()
    start = corpus.index("\n\n", len(corpus) // 2) + 2
    text = corpus[start:]
    return text, {
        "source": f"{CORPUS_PATH.parent.name}/{CORPUS_PATH.name}",
        "from_char": start,
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


def compute(src_gguf: Path, out: Path, say) -> dict:
    """llama-imatrix over the calibration text into ``out`` (GGUF); what to record on the artifacts."""
    exe = tool("llama-imatrix", "--gguf")
    text, calibration = calibration_text()
    calib = out.with_suffix(".txt")
    calib.write_text(text)
    say(
        f"computing an importance matrix with llama-imatrix on {calibration['source']} from character "
        f"{calibration['from_char']:,}"
    )
    cmd = [
        str(exe),
        "-m",
        str(src_gguf),
        "-f",
        str(calib),
        "-o",
        str(out),
        "-c",
        str(CALIBRATION_CHUNK_TOKENS),
        "--no-ppl",
        "-lv",
        "0",
    ]
    run = subprocess.run(cmd, capture_output=True, text=True)
    calib.unlink(missing_ok=True)
    if run.returncode != 0 or not out.is_file():
        raise EngineError(f"llama-imatrix failed ({run.returncode}): {run.stderr.strip()[-600:]}")
    return {
        "sha256": sha256_path(out),
        "calibration": calibration,
        "chunk_tokens": CALIBRATION_CHUNK_TOKENS,
        "tool": "llama-imatrix",
    }


def from_file(path: Path) -> dict:
    if not path.is_file():
        raise UserError("--imatrix", f"{path} is not a file.")
    return {"sha256": sha256_path(path), "calibration": {"source": f"user file {path.name}"}, "tool": "given"}


def quantize(src: Path, dst: Path, quant: str, imatrix: Path) -> None:
    """llama-quantize --imatrix: the same quantizer as the binding, with the matrix."""
    exe = tool("llama-quantize", "--gguf")
    run = subprocess.run(
        [str(exe), "--imatrix", str(imatrix), str(src), str(dst), quant], capture_output=True, text=True
    )
    if run.returncode != 0 or not dst.is_file():
        raise EngineError(
            f"llama-quantize {src.name} -> {quant} with an importance matrix failed "
            f"({run.returncode}): {run.stderr.strip()[-600:]}"
        )
