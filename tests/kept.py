"""Where the tests keep what they make once per machine (the models, the second mlx-lm environment, the index's
wheels), beside the bootstrap's wheel cache: ``$XDG_CACHE_HOME/siliconbench`` (default ``~/.cache``). Delete it to
start clean."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def kept_dir(name: str, override: str | None = None) -> Path:
    """``<cache>/siliconbench/<name>``, or the folder the environment variable ``override`` names."""
    if override and os.environ.get(override):
        return Path(os.environ[override])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "siliconbench" / name


def link_or_copy(src: Path, dst: Path) -> None:
    """A hard link to ``src`` at ``dst``; a copy where a link cannot cross file systems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
