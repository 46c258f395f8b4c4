"""sha256 of a user's weights, computed once: cached by real path, size and modification time.

Hashing an 8 GB GGUF takes tens of seconds; adding the same file again (a second form, another name, a
re-add after an upgrade) must not. The cache is one JSON file in the models folder
(``.digests.json``), keyed by the file's resolved path and checked against its size and ``st_mtime_ns``
before an entry is trusted, so a file replaced in place is hashed again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from siliconbench.contract.manifest import Artifact, SourceFile, combined_sha256

CACHE_NAME = ".digests.json"
CHUNK = 4 << 20
# (description, bytes done, bytes in all): how long work reports progress (the CLI draws a bar from it)
ByteProgress = Callable[[str, int, int], None]


class DigestCache:
    """The digests of one models folder's files, by real path, size and modification time."""

    def __init__(self, models_dir: Path):
        self.path = Path(models_dir) / CACHE_NAME
        try:
            self.entries: dict[str, dict] = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.entries = {}
        self.hits = self.misses = 0

    def sha256(self, file: Path, progress: ByteProgress | None = None) -> str:
        real = Path(file).resolve()
        st = real.stat()
        key, stamp = str(real), {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
        cached = self.entries.get(key)
        if cached and {k: cached.get(k) for k in stamp} == stamp:
            self.hits += 1
            return cached["sha256"]
        self.misses += 1
        digest = hash_file(real, progress)
        self.entries[key] = {**stamp, "sha256": digest}
        self._save()
        return digest

    def files(self, base: Path, rels: list[str], progress: ByteProgress | None = None) -> list[SourceFile]:
        """Each of ``rels`` (relative to ``base``) with its size and digest, sorted by name."""
        out = []
        for rel in sorted(rels):
            f = base / rel
            out.append(SourceFile(path=rel, size_bytes=f.stat().st_size, sha256=self.sha256(f, progress)))
        return out

    def _save(self) -> None:
        tmp = self.path.with_name(f"{CACHE_NAME}.{os.getpid()}.tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(self.entries, indent=1, sort_keys=True))
        tmp.replace(self.path)  # never a half-written cache


def hash_file(path: Path, progress: ByteProgress | None = None) -> str:
    h = hashlib.sha256()
    total, done = path.stat().st_size, 0
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
            done += len(chunk)
            if progress:
                progress(f"sha256 {path.name}", done, total)
    return h.hexdigest()


def artifact_digest(files: list[SourceFile], directory: bool) -> str:
    """A GGUF file: its own digest (what `sha256_path` gives a file); a directory or a split GGUF set: names and
    digests combined as `sha256_path` combines a directory's, so a folder of links digests the same either way."""
    if not directory and len(files) == 1:
        return files[0].sha256
    return combined_sha256((f.path, f.sha256) for f in sorted(files, key=lambda f: f.path))


def artifact_from(
    facts,
    rel: str,
    cache: DigestCache,
    *,
    origin=None,
    details: dict | None = None,
    progress: ByteProgress | None = None,
) -> Artifact:
    """The artifact of one form (`facts.FormFacts`) at ``rel`` in its model's folder: its files digested (through
    the cache), their total size, the artifact's digest, and the facts read from the files."""
    files = cache.files(facts.base, facts.files, progress)
    return Artifact(
        format=facts.format,
        quant=facts.quant,
        level=facts.level,
        path=rel,
        size_bytes=sum(f.size_bytes for f in files),
        sha256=artifact_digest(files, facts.format == "mlx"),
        files=files,
        origin=origin,
        details={**facts.details, **(details or {})},
    )
