"""An exclusive lock on a file, between processes of this host (fcntl.flock: the kernel drops it if its holder dies).

Used where processes of one host must take turns: engine environments' registry (`env add` twice at once) and the
memory-bandwidth probe (workers started together). ``worker/builds`` keeps its own: it imports nothing else of the
worker (tests/house/test_import_rules.py).
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive(lock_file: Path) -> Iterator[None]:
    """Hold ``lock_file`` (made, with its folder, if missing) for the block; later callers wait for it."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
