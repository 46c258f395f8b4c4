"""A user's file too large to travel in each job, stored once by digest and fetched by a worker that lacks it, on
SQLite and PostgreSQL; a file changed after expansion is refused naming its setting."""

from __future__ import annotations

import os

import pytest

from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.workloads.base import file_digest

from siliconbench.storage import user_files
from siliconbench.storage.database import session_scope
from siliconbench.storage.tables import UserFileChunk


def test_stored_once_by_digest_and_fetched_byte_for_byte(empty_db, tmp_path):
    src = tmp_path / "prompts.txt"
    src.write_bytes(os.urandom(user_files.CHUNK_BYTES * 2 + 12345))  # three chunks, the last a short one
    digest = file_digest(src)
    with session_scope(empty_db) as s:
        assert user_files.put(s, digest, src) is True
    with session_scope(empty_db) as s:
        assert user_files.put(s, digest, src) is False  # once: a second sweep naming it stores nothing
        assert s.query(UserFileChunk).filter_by(digest=digest).count() == 3
    with session_scope(empty_db) as s:
        got = user_files.fetch(s, digest, tmp_path / "cache" / "f")
    assert got.read_bytes() == src.read_bytes() and not list((tmp_path / "cache").glob(".*partial"))
    with session_scope(empty_db) as s, pytest.raises(KeyError):
        user_files.fetch(s, "sha256:" + "0" * 64, tmp_path / "cache" / "g")


def test_a_file_changed_since_expansion_is_refused_and_nothing_is_stored(empty_db, tmp_path):
    src = tmp_path / "prompts.txt"
    src.write_text("one prompt\n")
    digest = file_digest(src)
    src.write_text("another prompt\n")
    job = JobSpec.model_construct(params={"prompts": digest}, files={"prompts_file": str(src)})
    with pytest.raises(UserError) as e, session_scope(empty_db) as s:
        user_files.put_job_files(s, [job])
    assert e.value.field == "prompts" and "changed since the sweep read it" in e.value.message
    with session_scope(empty_db) as s:
        assert not user_files.stored(s, digest)
