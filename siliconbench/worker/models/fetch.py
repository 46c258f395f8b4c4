"""A worker that lacks a sweep's model fetches it before the job: from its origin, checked, then registered here.

The job carries what the coordinator's manifest says of the artifact (``JobSpec.fetch``): the model's facts and
the artifact with its files, their digests and its origin. ``url`` origins (``file://`` shared folders,
``http(s)://``) are copied file by file into ``<models_dir>/.fetching/<digest>/`` (resumable), each file's
sha256 checked, then moved into the model's folder; ``hf`` origins are downloaded into the Hugging Face cache at
the recorded commit and linked, as `models add` links them. The disk is checked before the first byte. The
model's manifest here gains the artifact last, so a half-fetched model is never one this worker offers.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import MANIFEST_NAME, Artifact, ModelManifest, write_manifest

from siliconbench.worker.models.digests import ByteProgress, DigestCache, artifact_digest
from siliconbench.worker.models.download import DigestMismatch, check_space, fetch_file
from siliconbench.worker.models.sources import file_urls, resolve_hf

FETCHING = ".fetching"


def present(models_dir: Path, model: str, sha256: str) -> bool:
    """Whether this worker's manifest of ``model`` has an artifact of that digest whose files are here."""
    mf = Path(models_dir) / model / MANIFEST_NAME
    if not mf.is_file():
        return False
    m = ModelManifest.model_validate_json(mf.read_text())
    return any(a.sha256 == sha256 and (mf.parent / a.path).exists() for a in m.artifacts)


def fetch_for_job(models_dir: Path, payload: dict, progress: ByteProgress | None = None) -> Artifact:
    """Fetch the artifact a job's ``fetch`` payload describes into this models folder and register it."""
    models_dir = Path(models_dir)
    facts = ModelManifest.model_validate({**payload["manifest"], "artifacts": []})
    art = Artifact.model_validate(payload["artifact"])
    origin = art.origin
    if origin is None or not origin.fetchable:
        where = f"a file on {origin.host} only ({origin.location})" if origin else "made on another host"
        raise UserError(
            "model",
            f"{facts.name} {art.quant} is {where}: run `siliconbench models add {facts.name} "
            "<its file or folder> --to-existing` on this Mac, or add it from a source the fleet can reach.",
        )
    check_space(models_dir, art.size_bytes, f"{facts.name} {art.quant}")
    directory = art.format == "mlx"
    folder = Path(art.path) if directory else Path(art.path).parent  # where the files go, in the model's folder
    final = models_dir / facts.name
    if origin.kind == "url":
        stage = models_dir / FETCHING / art.sha256[:16]
        for sf, url in zip(art.files, file_urls(origin, [f.path for f in art.files], directory), strict=True):
            fetch_file(url, stage / sf.path, sha256=sf.sha256, size=sf.size_bytes, progress=progress)
        _check_digest(art, art.files, directory)
        (final / folder).mkdir(parents=True, exist_ok=True)
        for sf in art.files:
            (final / folder / sf.path).parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / sf.path, final / folder / sf.path)
        shutil.rmtree(stage, ignore_errors=True)
    else:
        in_repo = [f"{origin.subfolder}/{f.path}" if origin.subfolder else f.path for f in art.files]
        snapshot = resolve_hf(f"hf:{origin.location}", revision=origin.revision, files=in_repo).path
        base = snapshot / origin.subfolder if origin.subfolder else snapshot
        got = DigestCache(models_dir).files(base, [f.path for f in art.files], progress)
        for want, have in zip(sorted(art.files, key=lambda f: f.path), got, strict=False):
            if want.sha256 != have.sha256:
                raise DigestMismatch(f"{origin.describe()} {want.path}", want.sha256, have.sha256)
        for sf in art.files:
            link = final / folder / sf.path
            link.parent.mkdir(parents=True, exist_ok=True)
            link.unlink(missing_ok=True)
            os.symlink(base / sf.path, link)
    _register(final, facts, art)
    return art


def _check_digest(art: Artifact, files, directory: bool) -> None:
    got = artifact_digest(files, directory)
    if got != art.sha256:
        raise DigestMismatch(f"{art.format} {art.quant}", art.sha256, got)


def _register(final: Path, facts: ModelManifest, art: Artifact) -> None:
    mf = final / MANIFEST_NAME
    if mf.is_file():
        m = ModelManifest.model_validate_json(mf.read_text())
        for key in ("n_layers", "hidden_size", "vocab_size"):
            if getattr(m, key) != getattr(facts, key):
                raise UserError(
                    key,
                    f"this host's model {m.name!r} has {key} {getattr(m, key)} but the sweep's has "
                    f"{getattr(facts, key)}: not the same model; rename one of them.",
                )
        m.artifacts = [a for a in m.artifacts if a.path != art.path and a.sha256 != art.sha256] + [art]
    else:
        m = facts.model_copy(update={"artifacts": [art]})
    write_manifest(final, m)
