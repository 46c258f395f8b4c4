"""Copy one file from a URL (``http://``, ``https://``, ``file://``) into place: resumable, verified, never half-named.

The bytes go to ``<dest>.partial`` first; an interrupted copy resumes from what is there (an HTTP ``Range``
request, or a seek for ``file://``), the finished file is checked against its sha256 and only then renamed
to ``dest``. A partial file is never registered anywhere: only ``dest`` is.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from siliconbench.contract.errors import UserError

from siliconbench.worker.models.digests import CHUNK, ByteProgress

TIMEOUT_S = 60


class DigestMismatch(UserError):
    def __init__(self, what: str, expected: str, got: str):
        super().__init__(
            "sha256", f"{what}: sha256 {got} does not match the manifest's {expected}; the copy was discarded."
        )
        self.expected, self.got = expected, got


def local_path(url: str) -> Path | None:
    """The path a ``file://`` URL names (None for any other URL)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "file":
        return None
    return Path(urllib.request.url2pathname(parts.path))


def join(base: str, rel: str) -> str:
    return base.rstrip("/") + "/" + urllib.parse.quote(rel)


def fetch_file(
    url: str, dest: Path, *, sha256: str | None = None, size: int | None = None, progress: ByteProgress | None = None
) -> Path:
    """``url`` copied to ``dest`` (resuming ``dest.partial``), its digest checked when ``sha256`` is given."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    have = partial.stat().st_size if partial.exists() else 0
    if size is not None and have > size:
        partial.unlink()
        have = 0
    h = hashlib.sha256()
    if have:
        with partial.open("rb") as f:
            for chunk in iter(lambda: f.read(CHUNK), b""):
                h.update(chunk)
    src = local_path(url)
    try:
        if src is not None:
            total = src.stat().st_size
            check_space(dest.parent, total - have, url)
            with src.open("rb") as fin, partial.open("ab") as fout:
                fin.seek(have)
                _copy(fin, fout, h, have, total, dest.name, progress)
        else:
            req = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
            with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
                if have and resp.status != 206:  # the server ignored the range: start again
                    have, h = 0, hashlib.sha256()
                    partial.unlink(missing_ok=True)
                length = resp.headers.get("Content-Length")
                total = have + int(length) if length else (size or 0)
                check_space(dest.parent, total - have, url)
                with partial.open("ab") as fout:
                    _copy(resp, fout, h, have, total, dest.name, progress)
        if total and partial.stat().st_size != total:  # the connection closed early, without an error
            raise ConnectionError(f"{partial.stat().st_size:,} of {total:,} bytes arrived")
    except FileNotFoundError as exc:
        raise UserError("source", f"{url}: no such file ({exc.filename}).") from exc
    except urllib.error.HTTPError as exc:
        raise UserError("source", f"{url}: HTTP {exc.code} {exc.reason}.") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise UserError(
            "source",
            f"{url}: the download stopped ({exc}); run again to resume from "
            f"{partial.stat().st_size if partial.exists() else 0:,} bytes.",
        ) from exc
    got = h.hexdigest()
    if sha256 is not None and got != sha256:
        partial.unlink(missing_ok=True)
        raise DigestMismatch(url, sha256, got)
    os.replace(partial, dest)
    return dest


def _copy(fin, fout, h, done: int, total: int, name: str, progress: ByteProgress | None) -> None:
    while chunk := fin.read(CHUNK):
        fout.write(chunk)
        h.update(chunk)
        done += len(chunk)
        if progress:
            progress(f"fetch {name}", done, total)
    fout.flush()
    os.fsync(fout.fileno())


def free_bytes(folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    return shutil.disk_usage(folder).free


def check_space(folder: Path, need: int, what: str, margin: int = 1 << 30) -> None:
    """Refuse before copying anything where ``need`` bytes and a margin do not fit."""
    free = free_bytes(folder)
    if need + margin > free:
        raise UserError(
            "disk",
            f"{what} needs {need / 2**30:.2f} GiB (+{margin / 2**30:.0f} GiB margin) in {folder}, "
            f"which has {free / 2**30:.2f} GiB free.",
        )
