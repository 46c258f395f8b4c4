"""A user's file stored once by its digest, for the workers that run its jobs (the user_files tables, 0016).

A serve workload's prompt file over 16 MiB (a dataset) does not travel in each job: the job names it by digest
(``JobSpec.files``), the one who stores the sweep puts its bytes here once (``put``: idempotent by digest), and a
worker on another machine writes them to its own cache (``fetch``), checking the digest before it uses them.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from siliconbench.contract.errors import UserError
from siliconbench.contract.workloads.base import FILE_SUFFIX

from siliconbench.storage.tables import UserFile, UserFileChunk

CHUNK_BYTES = 8 * 1024 * 1024  # one row's bytes: well inside PostgreSQL's 1 GB field and SQLite's blob limits


def put(session: Session, digest: str, path: Path) -> bool:
    """Store the file's bytes under ``digest`` unless they are there; True when stored now. A file whose bytes are no
    longer ``digest``'s (changed since the sweep was expanded) is refused."""
    if session.get(UserFile, digest) is not None:
        return False
    row = UserFile(digest=digest, size_bytes=0, chunks=0)
    session.add(row)
    session.flush()  # the chunks' parent first
    h, n, seq = hashlib.sha256(), 0, 0
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(CHUNK_BYTES), b""):
            h.update(block)
            n += len(block)
            # a Core insert: the session keeps no copy, so one chunk is in memory at a time
            session.execute(insert(UserFileChunk.__table__).values(digest=digest, seq=seq, data=block))
            seq += 1
    if f"sha256:{h.hexdigest()}" != digest:  # the caller's transaction rolls back: nothing is left stored
        raise ValueError(f"{path} changed since the sweep read it: its bytes are no longer {digest}")
    row.size_bytes, row.chunks = n, seq
    return True


def stored(session: Session, digest: str) -> bool:
    return session.get(UserFile, digest) is not None


def fetch(session: Session, digest: str, dest: Path) -> Path:
    """Write the stored file to ``dest`` (through a temporary name, so a half-written file is never found there),
    its digest checked; KeyError where nothing is stored under ``digest``."""
    if session.get(UserFile, digest) is None:
        raise KeyError(digest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
    h = hashlib.sha256()
    with tmp.open("wb") as out:
        seq = 0
        while True:
            block = session.scalar(
                select(UserFileChunk.data).where(UserFileChunk.digest == digest, UserFileChunk.seq == seq)
            )
            if block is None:
                break
            h.update(block)
            out.write(block)
            seq += 1
    if f"sha256:{h.hexdigest()}" != digest:
        tmp.unlink(missing_ok=True)
        raise ValueError(f"the stored bytes of {digest} do not hash to it")
    tmp.replace(dest)
    return dest


def put_job_files(session: Session, jobs) -> int:
    """Store every file the jobs name by digest (JobSpec.files: "<setting>_file" -> its path, the digest in the
    param "<setting>"), each once; how many were stored now."""
    seen: set[str] = set()
    stored_now = 0
    for job in jobs:
        for key, path in (job.files or {}).items():
            setting = key.removesuffix(FILE_SUFFIX)
            digest = job.params[setting]
            if digest in seen:
                continue
            seen.add(digest)
            try:
                stored_now += put(session, digest, Path(path))
            except (OSError, ValueError) as exc:
                raise UserError(setting, f"{path}: {exc}; expand the sweep again.") from None
    return stored_now
