"""llama.cpp's release tags as the watch sees them: the ``b<N>`` tags of a checkout, or the archives of a folder.

llama.cpp tags a release several times a day, ``b<build number>`` (the build number is ``git rev-list --count``).
A watch with ``llama_cpp: {source: DIR}`` reads the checkout's tags, after ``git fetch --tags`` where the remote
can be reached (a fetch that fails is the check's error; the tags already there are still read, so a Mac
offline for a day catches up when it is back). ``llama_cpp: {archives: DIR}`` reads the release archives'
names (``llama-b7123-bin-macos-arm64.zip``). The commits between two tags are what a bisection searches
(``siliconbench.coordinator.watch.bisections``): read here with git, never by checking anything out.
"""

from __future__ import annotations

from pathlib import Path

from siliconbench.contract.watch_spec import ARCHIVE, LLAMA_CPP, TAG, version_key

from siliconbench.commits import git as _git

GIT_TIMEOUT_S = 300


class TagsError(Exception):
    """The checkout or folder could not be read at all."""


def _asked(ask, *args):
    try:
        return ask(*args)
    except _git.GitError as exc:
        raise TagsError(str(exc)) from None


def fetch(source: str) -> None:
    """``git fetch --tags`` from the checkout's remotes; TagsError with git's words when it cannot."""
    _asked(_git.fetch_tags, source, GIT_TIMEOUT_S)


def tags(llama: dict) -> tuple[list[str], str | None]:
    """(the release tags, oldest first; the fetch's error or None). TagsError when nothing can be read."""
    if llama.get("archives"):
        folder = Path(llama["archives"])
        if not folder.is_dir():
            raise TagsError(f"no folder {folder}")
        found = {m.group(1) for p in folder.iterdir() if (m := ARCHIVE.match(p.name))}
        return sorted(found, key=lambda t: version_key(LLAMA_CPP, t)), None
    source, error = llama["source"], None
    if llama.get("fetch", True):
        try:
            fetch(source)
        except TagsError as exc:
            error = f"fetch failed, the checkout's own tags read: {exc}"
    names = [t for t in _asked(_git.tags, source, "b[0-9]*") if TAG.match(t)]
    return sorted(names, key=lambda t: version_key(LLAMA_CPP, t)), error


def archive_for(folder: str, tag: str) -> str | None:
    """The release archive of ``tag`` in ``folder`` (the first by name when there are several platforms'),
    or None."""
    hits = sorted(p for p in Path(folder).iterdir() if (m := ARCHIVE.match(p.name)) and m.group(1) == tag)
    return str(hits[0]) if hits else None


def sha_of(source: str, ref: str) -> str:
    """The full sha ``ref`` names in the checkout."""
    sha = _git.sha_of(source, ref)
    if sha is None:
        raise TagsError(f"{ref!r} names no commit in {source}")
    return sha


def commit_of(source: str, ref: str) -> dict:
    """{sha, number, subject} of the commit ``ref`` names."""
    return _asked(_git.commit, source, sha_of(source, ref)).as_dict()


def commits_between(source: str, good: str, bad: str) -> list[dict]:
    """The commits after ``good`` up to ``bad`` (bad last), oldest first, along the first-parent line:
    {sha, number, subject} each. TagsError when ``good`` is not an ancestor of ``bad``."""
    g, b = sha_of(source, good), sha_of(source, bad)
    line = _asked(_git.first_parent_line, source, g, b)
    if line is None:
        raise TagsError(f"{good} ({g[:12]}) is not an ancestor of {bad} ({b[:12]})")
    return [c.as_dict() for c in line]
