"""A Hugging Face cache laid out exactly as huggingface_hub lays it out, for offline tests of `hf:` sources.

    <cache>/models--ORG--NAME/refs/main                  the commit sha (40 hex)
    <cache>/models--ORG--NAME/blobs/<etag>               the bytes: sha256 for LFS files, git's blob sha1 else
    <cache>/models--ORG--NAME/snapshots/<commit>/<path>  relative symlink to ../../blobs/<etag>

Files are hard-linked into blobs/ where the filesystem allows (no 100 MB copies per test).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

LFS_SUFFIXES = (".gguf", ".safetensors", ".bin")


def _etag(path: Path) -> str:
    data_hash = (
        hashlib.sha256() if path.suffix in LFS_SUFFIXES else hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    )
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            data_hash.update(chunk)
    return data_hash.hexdigest()


def lay_out(cache: Path, repo: str, files: dict[str, Path], revision: str = "main") -> str:
    """Put ``files`` ({path in the repository: file here}) into ``cache`` as one commit of ``repo``; its sha."""
    commit = hashlib.sha1(("\n".join(f"{k}:{_etag(v)}" for k, v in sorted(files.items()))).encode()).hexdigest()
    root = cache / f"models--{repo.replace('/', '--')}"
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / revision).write_text(commit)
    for rel, src in files.items():
        etag = _etag(src)
        blob = root / "blobs" / etag
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.exists():
            try:
                os.link(src.resolve(), blob)
            except OSError:
                shutil.copyfile(src, blob)
        link = root / "snapshots" / commit / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return commit
