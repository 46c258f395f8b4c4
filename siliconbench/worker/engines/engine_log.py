"""What an engine said last: its log lines, kept in memory and, in a job's child process, written as they come to
the child's stderr, whose tail the runner keeps with every failed result.

llama-cpp-python with ``verbose=False`` points fd 2 at /dev/null while a model loads, so llama.cpp's messages
(and a CUDA backend's) were lost exactly when a load failed or crashed. The child duplicates its stderr before any
engine runs (``tee_to_stderr``); the engines pass every log line through ``line``; ``tail`` goes into an error.
"""

from __future__ import annotations

import os
import sys
from collections import deque

TAIL: deque[str] = deque(maxlen=200)
_fd: int | None = None
_file = None


def tee_to_stderr() -> None:
    global _fd
    _fd = os.dup(2)


def stream():
    """The copy of stderr as a file object (faulthandler writes there), or sys.stderr before tee_to_stderr."""
    global _file
    if _fd is None:
        return sys.stderr
    if _file is None:
        _file = os.fdopen(_fd, "w", closefd=False)
    return _file


def line(text: str) -> None:
    TAIL.append(text)
    if _fd is not None:
        try:
            os.write(_fd, text.encode(errors="replace"))
        except OSError:
            pass


def tail(n: int = 15) -> str:
    return "".join(list(TAIL)[-n:]).strip()
