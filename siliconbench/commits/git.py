"""git, asked about a checkout: every call one ``git -C SOURCE ...`` process, its failure a :class:`GitError` with
git's own words.

llama.cpp names a build as ``cmake/build-info.cmake`` does: its build number is ``git rev-list --count`` of the
commit, a release tag is ``b<number>``; between tags a commit reads ``b<number>+<sha7>`` (:func:`label`).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 120


class GitError(Exception):
    """git is missing, timed out, or refused (the message carries its words)."""


def git(source: Path | str, *args: str, timeout: float = TIMEOUT_S) -> str:
    """git's stdout, stripped; GitError when git cannot run or exits non-zero."""
    try:
        # `~` is this machine's home: a tags watch sends its checkout's path as written, each machine expands it
        where = str(Path(source).expanduser())
        out = subprocess.run(["git", "-C", where, *args], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise GitError("git is not installed") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args)} in {source}: no answer in {timeout:g} s") from None
    if out.returncode != 0:
        raise GitError(f"git {' '.join(args)} in {source}: {out.stderr.strip()[-400:]}")
    return out.stdout.strip()


def answers(source: Path | str, *args: str) -> bool:
    """Whether git exits 0 (a question asked by exit status: is-ancestor, cat-file -e)."""
    try:
        return subprocess.run(["git", "-C", str(source), *args], capture_output=True, timeout=TIMEOUT_S).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def is_checkout(source: Path | str) -> bool:
    return Path(source, ".git").exists() or answers(source, "rev-parse", "--is-inside-work-tree")


def sha_of(source: Path | str, ref: str) -> str | None:
    """The full sha of the commit ``ref`` names, or None when it names none."""
    try:
        return git(source, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}") or None
    except GitError:
        return None


@dataclass(frozen=True)
class Commit:
    sha: str
    number: int  # the build number: git rev-list --count
    subject: str

    def as_dict(self) -> dict:
        return {"sha": self.sha, "number": self.number, "subject": self.subject}


def commit(source: Path | str, sha: str) -> Commit:
    return Commit(sha, int(git(source, "rev-list", "--count", sha)), git(source, "log", "-1", "--format=%s", sha))


def describe(source: Path | str, sha: str) -> str:
    return git(source, "describe", "--tags", "--always", sha)


def root_of(source: Path | str, sha: str) -> str:
    """The repository's root commit: every clone of llama.cpp shares it."""
    return sorted(git(source, "rev-list", "--max-parents=0", sha).split())[0]


def first_parent_line(source: Path | str, good_sha: str, bad_sha: str) -> list[Commit] | None:
    """The commits after ``good_sha`` up to ``bad_sha`` (bad last), oldest first, along the first-parent line: what
    a bisection searches. None when ``good_sha`` is not an ancestor of ``bad_sha``."""
    if not answers(source, "merge-base", "--is-ancestor", good_sha, bad_sha):
        return None
    lines = git(
        source, "log", "--first-parent", "--ancestry-path", "--reverse", "--format=%H %s", f"{good_sha}..{bad_sha}"
    )
    out = []
    for line in lines.splitlines():
        sha, _, subject = line.partition(" ")
        # Along the first-parent line each commit adds its merged side too: count, never assume +1.
        out.append(Commit(sha, int(git(source, "rev-list", "--count", sha)), subject))
    return out


def fetch_tags(source: Path | str, timeout: float = 300) -> None:
    """``git fetch --tags`` from every remote (a checkout with none has nothing to fetch)."""
    if git(source, "remote").split():
        git(source, "fetch", "--tags", "--quiet", "--all", timeout=timeout)


def tags(source: Path | str, pattern: str) -> list[str]:
    return git(source, "tag", "--list", pattern).split()


def archive(source: Path | str, sha: str) -> bytes:
    """The commit's files as a tar (``git archive``): a build reads them without touching the user's tree."""
    try:
        out = subprocess.run(
            ["git", "-C", str(source), "archive", "--format=tar", sha], capture_output=True, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git archive {sha[:12]} in {source}: {exc}") from None
    if out.returncode != 0:
        raise GitError(f"git archive {sha[:12]} in {source}: {out.stderr.decode(errors='replace').strip()[-400:]}")
    return out.stdout


def label(number: int, sha: str, describe: str) -> str:
    """How a commit is named where a person reads it: ``b7123`` on its tag, ``b7123+abcdef0`` between tags."""
    tag = f"b{number}"
    return tag if describe == tag else f"{tag}+{sha[:7]}"
