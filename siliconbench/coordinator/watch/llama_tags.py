"""llama.cpp's release tags as the watch sees them: the ``b<N>`` tags of a checkout, or the archives of a folder.

llama.cpp tags a release several times a day, ``b<build number>`` (the build number is ``git rev-list --count``).
A watch with ``llama_cpp: {source: DIR}`` reads the checkout's tags, after ``git fetch --tags`` where the remote
can be reached (a fetch that fails is the check's error; the tags already there are still read, so a Mac
offline for a day catches up when it is back). ``llama_cpp: {archives: DIR}`` reads the release archives'
names (``llama-b7123-bin-macos-arm64.zip``). The commits between two tags are what a bisection searches
(``siliconbench.coordinator.watch.bisections``): read here with git, never by checking anything out.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from siliconbench.contract.watch_spec import ARCHIVE, LLAMA_CPP, TAG, version_key

GIT_TIMEOUT_S = 300


class TagsError(Exception):
    """The checkout or folder could not be read at all."""


def _git(source: str, *args: str, timeout: float = 60) -> str:
    try:
        out = subprocess.run(["git", "-C", source, *args], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TagsError(f"git {' '.join(args)} in {source}: {exc}") from None
    if out.returncode != 0:
        raise TagsError(f"git {' '.join(args)} in {source}: {out.stderr.strip()[-300:]}")
    return out.stdout


def fetch(source: str) -> None:
    """``git fetch --tags`` from the checkout's remotes; TagsError with git's words when it cannot."""
    if not _git(source, "remote").split():
        return  # a checkout with no remote has nothing to fetch: its tags are what it holds
    _git(source, "fetch", "--tags", "--quiet", "--all", timeout=GIT_TIMEOUT_S)


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
    names = [t for t in _git(source, "tag", "--list", "b[0-9]*").split() if TAG.match(t)]
    return sorted(names, key=lambda t: version_key(LLAMA_CPP, t)), error


def archive_for(folder: str, tag: str) -> str | None:
    """The release archive of ``tag`` in ``folder`` (the first by name when there are several platforms'),
    or None."""
    hits = sorted(p for p in Path(folder).iterdir() if (m := ARCHIVE.match(p.name)) and m.group(1) == tag)
    return str(hits[0]) if hits else None


def sha_of(source: str, ref: str) -> str:
    """The full sha ``ref`` names in the checkout."""
    return _git(source, "rev-parse", "--verify", f"{ref}^{{commit}}").strip()


def commit_of(source: str, ref: str) -> dict:
    """{sha, number, subject} of the commit ``ref`` names."""
    sha = sha_of(source, ref)
    number = int(_git(source, "rev-list", "--count", sha).strip())
    return {"sha": sha, "number": number, "subject": _git(source, "log", "-1", "--format=%s", sha).strip()}


def commits_between(source: str, good: str, bad: str) -> list[dict]:
    """The commits after ``good`` up to ``bad`` (bad last), oldest first, along the first-parent line:
    {sha, number, subject} each. TagsError when ``good`` is not an ancestor of ``bad``."""
    g, b = sha_of(source, good), sha_of(source, bad)
    if subprocess.run(["git", "-C", source, "merge-base", "--is-ancestor", g, b]).returncode != 0:
        raise TagsError(f"{good} ({g[:12]}) is not an ancestor of {bad} ({b[:12]})")
    lines = _git(source, "log", "--first-parent", "--ancestry-path", "--reverse", "--format=%H %s", f"{g}..{b}")
    out = []
    for line in lines.splitlines():
        sha, _, subject = line.partition(" ")
        # Along the first-parent line each commit adds its merged side too: count, never assume +1.
        out.append({"sha": sha, "number": int(_git(source, "rev-list", "--count", sha).strip()), "subject": subject})
    return out
