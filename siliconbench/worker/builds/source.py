"""A llama.cpp source: a git checkout (a version is a commit) or any source tree (a version is its content digest).

A commit is named as llama.cpp names its builds (``siliconbench.commits.git.label``). Nothing here checks a commit
out in the user's checkout: a build reads the commit's files with ``git archive`` (``export``), so the user's
working tree and its branch are never touched. git itself is asked through ``siliconbench.commits.git``; its
failures become a UserError naming the option they came from.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path

from siliconbench.contract.errors import UserError

from siliconbench.commits import git as _git

# Left out of a plain tree's digest and of what a build copies: what a build or an editor leaves there.
SKIPPED = {".git", "build", ".cache", "__pycache__", ".DS_Store"}


@dataclass(frozen=True)
class Revision:
    """One version of a source: for a git checkout the commit, else the tree's digest."""

    sha: str  # full commit sha; for a plain tree "tree-<sha256 of its files, 16 hex>"
    number: int | None  # the build number (git rev-list --count); None for a plain tree
    describe: str  # git describe --tags --always (b7123, b7123-4-gabcdef0); the digest for a plain tree
    subject: str  # the commit's subject line ("" for a plain tree)
    lineage: str  # the repository's root commit: every clone of llama.cpp shares it (one incremental tree)
    source: str  # the folder it was read from

    @property
    def short(self) -> str:
        return self.sha[:12] if self.number is not None else self.sha

    @property
    def label(self) -> str:
        """How the version is named where a person reads it: b7123 on a tag, b7123+abcdef0 between tags."""
        if self.number is None:
            return self.sha
        if self.lineage == "prebuilt":  # a release archive is its tag's build (its sha is the archive's digest)
            return f"b{self.number}"
        return _git.label(self.number, self.sha, self.describe)

    def as_dict(self) -> dict:
        return asdict(self)


def _asked(field: str, ask, *args):
    """``ask(*args)`` of the git helper, its GitError a UserError naming ``field``."""
    try:
        return ask(*args)
    except _git.GitError as exc:
        raise UserError(field, f"{exc}") from None


def is_git(source: Path) -> bool:
    return _git.is_checkout(source)


def check_llama_tree(root: Path, field: str = "--source") -> None:
    if not (root / "include" / "llama.h").is_file() or not (root / "CMakeLists.txt").is_file():
        raise UserError(field, f"{root} is not a llama.cpp source tree (no include/llama.h and CMakeLists.txt).")


def resolve(source: Path | str, ref: str | None = None, field: str = "--ref") -> Revision:
    """The revision ``ref`` names in ``source`` (HEAD when None); a plain tree has one revision, its digest.
    ``field`` is what a refusal names (the option the ref came from)."""
    src = Path(source).expanduser().resolve()
    if not src.is_dir():
        raise UserError("--source", f"{src} is not a folder.")
    if not is_git(src):
        if ref:
            raise UserError(field, f"{src} is not a git checkout, so it has no ref {ref!r}; leave {field} out.")
        check_llama_tree(src)
        return Revision(tree_digest(src), None, tree_digest(src), "", "tree", str(src))
    sha = _git.sha_of(src, ref or "HEAD")
    if not sha:
        raise UserError(field, f"{ref!r} names no commit in {src} (a tag such as b7123, a branch or a sha).")
    if not _git.answers(src, "cat-file", "-e", f"{sha}:include/llama.h"):
        raise UserError(field, f"commit {sha[:12]} of {src} has no include/llama.h: not a llama.cpp tree.")
    c = _asked(field, _git.commit, src, sha)
    return Revision(
        sha=sha,
        number=c.number,
        describe=_asked(field, _git.describe, src, sha),
        subject=c.subject,
        lineage=_asked(field, _git.root_of, src, sha),
        source=str(src),
    )


def has_ref(source: Path | str, ref: str) -> bool:
    """Whether ``ref`` names a commit in the checkout ``source``."""
    return _git.sha_of(Path(source).expanduser(), ref) is not None


def fetch_tags(source: Path | str) -> None:
    """``git fetch --tags`` from every remote of the checkout (a UserError with git's words when it fails)."""
    _asked("--ref", _git.fetch_tags, Path(source).expanduser())


def between(source: Path | str, good: str, bad: str) -> list[Revision]:
    """The commits after ``good`` up to ``bad`` (bad last), oldest first, along the first-parent line: the
    sequence a bisection searches. Refused when ``good`` is not an ancestor of ``bad``."""
    src = Path(source).expanduser().resolve()
    g, b = resolve(src, good, "--good"), resolve(src, bad, "--bad")
    if g.number is None:
        raise UserError("--source", f"{src} is not a git checkout: a bisection needs the commits between two refs.")
    line = _asked("--good", _git.first_parent_line, src, g.sha, b.sha)
    if line is None:
        raise UserError("--good", f"{good} ({g.sha[:12]}) is not an ancestor of {bad} ({b.sha[:12]}).")
    if not line:
        raise UserError("--bad", f"{bad} is {good}: there is nothing between them to search.")
    return [resolve(src, c.sha) for c in line]


def export(rev: Revision, dest: Path) -> None:
    """Write the revision's files into ``dest`` (emptied first)."""
    dest.mkdir(parents=True, exist_ok=True)
    if rev.number is None:
        copy_tree(Path(rev.source), dest)
        return
    data = _asked("--ref", _git.archive, rev.source, rev.sha)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="tar")


def copy_tree(src: Path, dest: Path) -> None:
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d not in SKIPPED]
        rel = Path(root).relative_to(src)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for f in files:
            if f not in SKIPPED:
                data = (Path(root) / f).read_bytes()
                (dest / rel / f).write_bytes(data)


def tree_digest(root: Path) -> str:
    """sha256 over every file's path and content (build folders and .git left out): a plain tree's version."""
    h = hashlib.sha256()
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED)
        for f in sorted(files):
            if f in SKIPPED:
                continue
            p = Path(dirpath) / f
            h.update(str(p.relative_to(root)).encode() + b"\0")
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return f"tree-{h.hexdigest()[:16]}"
