"""`models add NAME SOURCE...`: a user's own model, in one or several forms, proven to be one model.

Each SOURCE is resolved to files on this machine (`sources`), read for its facts (`facts`), checked against
the other forms (same architecture, layers, hidden size, vocabulary; GGUF and MLX forms tokenize alike:
`tokens`), digested once (`digests`) and linked, never copied, into ``<models_dir>/<NAME>/``:

    gguf/<file>.gguf       -> the user's GGUF (each part of a split set)
    mlx-<quant>/<file>     -> each file of the user's folder that mlx-lm reads

Nothing is half-made: links and converted files are built in a hidden folder, checked, then moved into the
model's folder, and the manifest is replaced last, in one rename.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from siliconbench.contract.engines import by_format
from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import MANIFEST_NAME, Artifact, ModelManifest, write_manifest

from siliconbench.worker.models.digests import ByteProgress, DigestCache, artifact_from
from siliconbench.worker.models.facts import FormFacts, form_facts, network_shape
from siliconbench.worker.models.sources import Resolved, resolve

Say = Callable[[str], None]


def add_model(
    models_dir: Path,
    name: str,
    sources: list[str],
    *,
    to_existing: bool = False,
    force: bool = False,
    convert: bool = False,
    allow_tokenizer_mismatch: bool = False,
    say: Say | None = None,
    progress: ByteProgress | None = None,
) -> ModelManifest:
    say = say or (lambda _m: None)
    models_dir = Path(models_dir).expanduser().absolute()
    _check_name(name)
    final = models_dir / name
    existing = _existing(final, to_existing, force)
    if not sources:
        raise UserError(
            "source", "name at least one SOURCE: a GGUF file, a model folder, file://, https:// or hf:ORG/REPO."
        )

    forms: list[tuple[Resolved, FormFacts]] = []
    for src in sources:
        say(f"resolving {src}")
        r = resolve(src, models_dir, progress)
        forms.append((r, form_facts(r.path)))
    _check_same_model(forms, existing)

    stage = models_dir / f".{name}.adding-{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    try:
        if convert:
            from siliconbench.worker.models.quants.convert import (
                convert_to_gguf,  # numpy weights and the GGUF writer: only --convert needs them
            )

            for r, f in list(forms):
                if f.format == "mlx" and f.level == "full":
                    say(f"converting {r.source} to GGUF {f.quant.upper()}")
                    out = convert_to_gguf(f.base, stage / "gguf" / f"{name}-{f.quant.upper()}.gguf", name=name)
                    forms.append((Resolved(r.source, out, r.origin), form_facts(out)))
            if not any(f.format == "gguf" for _r, f in forms):
                raise UserError("--convert", "no source is an unquantized (f32, f16, bf16) model folder to convert.")
        cache = DigestCache(models_dir)
        kept = list(existing.artifacts) if existing else []
        digests = {a.sha256 for a in kept}
        new: list[Artifact] = []
        for r, f in forms:
            art = _artifact(stage, r, f, cache, progress, taken={a.path for a in kept + new})
            if art.sha256 in digests:
                say(f"{r.source}: already in {name} (same sha256 {art.sha256[:12]})")
                continue
            digests.add(art.sha256)
            new.append(art)
            say(f"{f.format} {f.quant} (level {f.level}): {art.size_bytes / 2**20:,.1f} MiB, sha256 {art.sha256[:12]}")
        mismatch = _tokenizers(final, stage, kept, new, allow_tokenizer_mismatch, say)
        head = next((f for _r, f in forms if f.level == "full"), forms[0][1])
        manifest = ModelManifest(
            name=name,
            family=head.family,
            params=existing.params if existing else head.params,
            n_ctx=head.n_ctx,
            hidden_size=head.hidden_size,
            n_layers=head.n_layers,
            n_heads=head.n_heads,
            n_kv_heads=head.n_kv_heads,
            head_dim=head.head_dim,
            vocab_size=head.vocab_size,
            n_experts=head.n_experts,
            n_experts_used=head.n_experts_used,
            kv_lora_rank=head.kv_lora_rank,
            source=existing.source if existing else "models add " + " ".join(sources),
            artifacts=kept + new,
            tokenizer_mismatch=mismatch or (existing.tokenizer_mismatch if existing else None),
        )
        _move_into_place(stage, final, new, replace=force and not to_existing)
        write_manifest(final, manifest)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    say(f"{name}: {len(manifest.artifacts)} artifacts in {final}")
    return manifest


def _check_name(name: str) -> None:
    if not name or "/" in name or name.startswith(".") or name != name.strip():
        raise UserError("name", f"{name!r}: a model name is one folder name (no '/', not starting with '.').")


def _existing(final: Path, to_existing: bool, force: bool) -> ModelManifest | None:
    mf = final / MANIFEST_NAME
    if to_existing:
        if not mf.is_file():
            raise UserError("--to-existing", f"there is no model {final.name!r} in {final.parent} to add forms to.")
        return ModelManifest.model_validate_json(mf.read_text())
    if final.exists() and not force:
        raise UserError(
            "name",
            f"model {final.name!r} already exists in {final.parent}: add forms to it with "
            "--to-existing, or replace it with --force.",
        )
    return None


def _check_same_model(forms: list[tuple[Resolved, FormFacts]], existing: ModelManifest | None) -> None:
    """Every form has the first one's shape (FormFacts.shape: layers, hidden size, heads, KV heads, head size,
    vocabulary, expert counts), and the model's where it exists. The architecture's name is not compared: the same
    network is `qwen3_moe` to mlx-lm and `qwen3moe` to llama.cpp (siliconbench/worker/models/architectures.py)."""
    if existing:
        ref_name, ref = f"model {existing.name!r}", network_shape(existing)
    else:
        ref_name, ref = forms[0][0].source, forms[0][1].shape()
    for r, f in forms:
        shape = f.shape()
        for key in [*ref, *(k for k in shape if k == "kv_lora_rank" and k not in ref)]:
            if shape.get(key) != ref.get(key):
                raise UserError(
                    key,
                    f"{r.source} ({f.architecture}) has {key} {shape.get(key)!r} but {ref_name} has {ref.get(key)!r}: "
                    "not the same model. Add it under another name.",
                )


def _artifact(
    stage: Path, r: Resolved, f: FormFacts, cache: DigestCache, progress: ByteProgress | None, taken: set[str]
) -> Artifact:
    """Links (or, for a converted file, the file itself) under ``stage``, and the artifact that describes them."""
    made_here = f.base.is_relative_to(stage)
    rel = _free(f"mlx-{f.quant}", taken) if f.format == "mlx" else _free_gguf(f.files[0], taken)
    # a converted file exists here only: no origin to fetch it from; its source is in details
    art = artifact_from(
        f,
        rel,
        cache,
        origin=None if made_here else r.origin,
        progress=progress,
        details={"converted_from": r.source} if made_here else None,
    )
    if not made_here:
        folder = Path(rel) if f.format == "mlx" else Path(rel).parent  # split parts lie beside the first
        for sf in art.files:
            link = stage / folder / sf.path
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink((f.base / sf.path).absolute(), link)
    return art


def _free(rel: str, taken: set[str]) -> str:
    i, out = 2, rel
    while out in taken:
        out, i = f"{rel}-{i}", i + 1
    return out


def _free_gguf(first: str, taken: set[str]) -> str:
    """gguf/<file>, or gguf-2/<file> ... where a form of that file name is already there (split parts keep
    their names: llama.cpp finds them beside the first)."""
    folders = {str(Path(t).parent) for t in taken if Path(t).name == first}
    folder, i = "gguf", 2
    while folder in folders:
        folder, i = f"gguf-{i}", i + 1
    return f"{folder}/{first}"


def _tokenizers(
    final: Path, stage: Path, kept: list[Artifact], new: list[Artifact], allow: bool, say: Say
) -> str | None:
    """Every new form must turn one text into the ids the model's first form gives (a kept one, else the first new
    one), whichever engine reads it: a third form with a tokenizer of its own would score other tokens."""

    def where(a: Artifact) -> Path:
        return (stage if a in new else final) / a.path

    def named(a: Artifact) -> str:
        return f"{by_format(a.format)[0]} {a.quant} ({a.path})"

    reference = (kept or new)[0]
    others = [a for a in new if a is not reference]
    if not others:
        return None
    from siliconbench.worker.models.tokens import check_text, difference, form_ids  # loads the engines' tokenizers

    text = check_text()
    say(f"checking that {len(others)} form(s) and {named(reference)} tokenize alike")
    ref = form_ids(where(reference), reference.format, text)
    diffs = []
    for a in others:
        diff = difference(ref, form_ids(where(a), a.format, text), named(reference), named(a))
        if diff is None:
            continue
        if not allow:
            raise UserError(
                "tokenizer",
                f"{diff} The forms would not be given the same tokens; add them under different names, or pass "
                "--allow-tokenizer-mismatch to record the difference on every result.",
            )
        say(f"tokenizers differ (recorded on every result): {diff}")
        diffs.append(diff)
    return " ".join(diffs) or None


def _move_into_place(stage: Path, final: Path, new: list[Artifact], replace: bool) -> None:
    if replace and final.exists():
        shutil.rmtree(final)
    final.mkdir(parents=True, exist_ok=True)
    for a in new:
        if a.format == "gguf":  # several GGUF artifacts share a folder: move their files one by one
            folder = Path(a.path).parent
            (final / folder).mkdir(parents=True, exist_ok=True)
            for sf in a.files:
                os.replace(stage / folder / sf.path, final / folder / sf.path)
        else:
            os.replace(stage / a.path, final / a.path)
