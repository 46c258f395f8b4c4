"""`models quantize NAME --gguf Q6_K,Q5_K_M --mlx 6,5,3`: more forms of a model, made from its full precision.

GGUF types come from llama.cpp's own quantizer (through llama-cpp-python: `formats.quantize_gguf`), run on the
model's unquantized GGUF (F32 first, then BF16, F16); MLX bit widths from mlx-lm's `convert` on its unquantized
folder (f32 first), affine with a group size of 32, 64 or 128, or one of mlx-lm's mixed recipes. Each new form is
read back for its facts (bits per weight, tensor types, quantization block) and digested like any other, then
added to the manifest, which is replaced last in one rename. The types llama.cpp refuses without an importance
matrix get one (siliconbench/worker/models/quants/imatrix.py): the user's ``--imatrix FILE`` (then used for every GGUF type asked),
or one computed with llama-imatrix on the shipped calibration text (used for those types only), kept in the
model's ``imatrix/`` folder by the digests of its source and text; its digest is on every artifact made with it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import Artifact, ModelCatalog, write_manifest

from siliconbench.worker.models.digests import DigestCache, artifact_from
from siliconbench.worker.models.facts import form_facts
from siliconbench.worker.models.make import formats
from siliconbench.worker.models.quants import imatrix

# llama.cpp refuses these without an importance matrix (tools/quantize, src/llama-quant.cpp)
NEEDS_IMATRIX = ("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "Q2_K_S")
MLX_BITS = (2, 3, 4, 5, 6, 8)
GROUP_SIZES = (32, 64, 128)
MLX_RECIPES = ("mixed_2_6", "mixed_3_4", "mixed_3_6", "mixed_4_6")
SOURCE_ORDER = ("f32", "bf16", "f16")


def gguf_type_known(name: str) -> bool:
    import llama_cpp  # the quantizer's own list of file types

    return hasattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{name}")


def check_request(
    gguf_types: list[str], mlx_bits: list[int], group_size: int, recipe: str | None, imatrix_file: Path | None = None
) -> None:
    """Every requested form is one the quantizers make, with the tools it needs, before anything is written."""
    if imatrix_file is not None:
        imatrix.from_file(imatrix_file)
        imatrix.tool("llama-quantize", "--imatrix")
    elif any(t in NEEDS_IMATRIX for t in gguf_types):
        for name in ("llama-imatrix", "llama-quantize"):
            imatrix.tool(name, "--gguf")  # names the build script where the tools are missing
    for t in gguf_types:
        if not gguf_type_known(t):
            raise UserError(
                "--gguf",
                f"{t!r} is not a type llama.cpp's quantizer knows (Q8_0, Q6_K, Q5_K_M, Q4_K_M, "
                "Q4_0, IQ4_XS, IQ3_S, Q3_K_M, Q2_K ...).",
            )
    for b in mlx_bits:
        if b not in MLX_BITS:
            raise UserError("--mlx", f"{b} bits: mlx-lm quantizes to {', '.join(map(str, MLX_BITS))} bits.")
    if group_size not in GROUP_SIZES:
        raise UserError("--group-size", f"{group_size}: mlx-lm's group sizes are {', '.join(map(str, GROUP_SIZES))}.")
    if recipe is not None and recipe not in MLX_RECIPES:
        raise UserError("--mlx-recipe", f"{recipe!r} is not one of mlx-lm's recipes.", list(MLX_RECIPES))


def quantize_model(
    models_dir: Path,
    name: str,
    *,
    gguf_types: list[str],
    mlx_bits: list[int],
    group_size: int = 64,
    recipe: str | None = None,
    imatrix_file: Path | None = None,
    say: Callable[[str], None] | None = None,
):
    say = say or (lambda _m: None)
    gguf_types = [t.strip().upper() for t in gguf_types if t.strip()]
    check_request(gguf_types, mlx_bits, group_size, recipe, imatrix_file)
    cat = ModelCatalog(models_dir)
    m = cat.get(name, field="name")
    final = cat.models_dir / name
    have = {(a.format, a.quant) for a in m.artifacts}
    src_gguf = _source(m, "gguf", "--gguf") if gguf_types else None
    src_mlx = _source(m, "mlx", "--mlx") if mlx_bits or recipe else None
    stage = cat.models_dir / f".{name}.quantizing-{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    cache = DigestCache(cat.models_dir)
    new: list[Artifact] = []
    try:
        todo = [t for t in gguf_types if ("gguf", t) not in have]
        for t in sorted(set(gguf_types) - set(todo)):
            say(f"GGUF {t}: already there")
        matrix = _importance_matrix(final, src_gguf, todo, imatrix_file, say)
        for t in todo:
            rel = f"gguf/{name}-{t}.gguf"
            (stage / "gguf").mkdir(exist_ok=True)
            if matrix and (imatrix_file is not None or t in NEEDS_IMATRIX):
                say(f"quantizing GGUF {t} from {src_gguf.quant} with llama.cpp and the importance matrix")
                imatrix.quantize(final / src_gguf.path, stage / rel, t, matrix[0])
                new.append(_artifact(stage, rel, cache, src_gguf, matrix=matrix[1]))
            else:
                say(f"quantizing GGUF {t} from {src_gguf.quant} with llama.cpp")
                formats.quantize_gguf(final / src_gguf.path, stage / rel, t)
                new.append(_artifact(stage, rel, cache, src_gguf))
        mlx_forms = [(b, None) for b in mlx_bits] + ([(None, recipe)] if recipe else [])
        for bits, rec in mlx_forms:
            quant = f"{rec or f'{bits}bit'}" + ("" if group_size == 64 else f"-g{group_size}")
            if ("mlx", quant) in have:
                say(f"MLX {quant}: already there")
                continue
            rel = f"mlx-{quant}"
            say(f"quantizing MLX {quant} from {src_mlx.quant} with mlx-lm")
            low = bits or int(rec.split("_")[1])  # a recipe's base width: mixed_3_6 is 3 bits, 6 where it matters
            formats.convert_mlx(final / src_mlx.path, stage / rel, low, group_size, quant_predicate=rec)
            new.append(_artifact(stage, rel, cache, src_mlx))
        for a in new:
            (final / a.path).parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / a.path, final / a.path)
        m.artifacts += new
        write_manifest(final, m)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return m, new


def _importance_matrix(
    final: Path, src: Artifact | None, todo: list[str], given: Path | None, say
) -> tuple[Path, dict] | None:
    """(the matrix file, what to record) where one is given or a type needs one; computed once per source
    digest and calibration text, then reused from the model's imatrix/ folder."""
    if given is not None:
        return given, imatrix.from_file(given)
    if not any(t in NEEDS_IMATRIX for t in todo):
        return None
    _, calibration = imatrix.calibration_text()
    path = final / "imatrix" / f"{src.sha256[:16]}-{calibration['sha256'][:16]}.gguf"
    record_path = path.with_suffix(".json")
    if path.is_file() and record_path.is_file():
        say(f"importance matrix: reusing {path.relative_to(final)}")
        return path, json.loads(record_path.read_text())
    path.parent.mkdir(exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    record = {
        **imatrix.compute(final / src.path, partial, say),
        "from": src.quant,
        "path": str(path.relative_to(final)),
    }
    os.replace(partial, path)
    record_path.write_text(json.dumps(record, indent=1))
    return path, record


def _source(m, fmt: str, option: str) -> Artifact:
    full = {a.quant.lower(): a for a in m.artifacts if a.format == fmt and a.level == "full"}
    for dtype in SOURCE_ORDER:
        if dtype in full:
            return full[dtype]
    raise UserError(
        option,
        f"model {m.name!r} has no unquantized {fmt.upper()} form to quantize from "
        f"(add one with `models add {m.name} ... --to-existing`, or --convert a checkpoint).",
    )


def _artifact(stage: Path, rel: str, cache: DigestCache, src: Artifact, matrix: dict | None = None) -> Artifact:
    f = form_facts(stage / rel)
    if f.format == "mlx":  # keep what mlx-lm reads (its README goes): the folder digests as its artifact
        for p in (stage / rel).rglob("*"):
            if p.is_file() and str(p.relative_to(stage / rel)) not in f.files:
                p.unlink()
    details = {"quantized_from": src.quant, **({"imatrix": matrix} if matrix else {})}
    return artifact_from(f, rel, cache, details=details)
