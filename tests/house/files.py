"""The project's own files, as git sees them (tracked, or new and not ignored): never the virtualenv or a cache."""

from __future__ import annotations

import subprocess
from pathlib import Path


def project_files(root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    paths = (root / line for line in sorted(set(out.splitlines())))
    return [p for p in paths if p.suffix in suffixes and p.is_file()]
