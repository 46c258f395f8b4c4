"""Page-cache state of model files: measured with mincore(2), dropped through the platform seam (Linux:
posix_fadvise; Darwin: msync MS_INVALIDATE), warmed by reading.

The swap workload records the measured fraction with every swap instead of assuming a state: an eviction
can leave pages behind (another process maps them, a filesystem such as tmpfs keeps them).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from pathlib import Path

import numpy as np

from siliconbench.worker import platform

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
MAP_FAILED = ctypes.c_void_p(-1).value


def files_of(path: Path) -> list[Path]:
    """The files of an artifact: the file itself, or every file of a directory."""
    path = Path(path)
    return [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())


def _resident_pages(path: Path) -> tuple[int, int]:
    size = path.stat().st_size
    if size == 0:
        return 0, 0
    n = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, MAP_FAILED):
            raise OSError(ctypes.get_errno(), f"mmap of {path} failed")
        try:
            vec = (ctypes.c_ubyte * n)()
            if _libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore of {path} failed")
            return int((np.frombuffer(vec, dtype=np.uint8) & 1).sum()), n
        finally:
            _libc.munmap(ctypes.c_void_p(addr), size)
    finally:
        os.close(fd)


def _resident_totals(path: Path) -> tuple[int, int]:
    res = tot = 0
    for f in files_of(path):
        r, t = _resident_pages(f)
        res, tot = res + r, tot + t
    return res, tot


def resident_fraction(path: Path) -> float:
    """Fraction of the artifact's file pages now in the page cache (mapping a file does not read it)."""
    res, tot = _resident_totals(path)
    return res / tot if tot else 1.0


def resident_bytes(path: Path) -> int:
    """Bytes of the artifact's files now in the page cache (whole pages)."""
    return _resident_totals(path)[0] * mmap.PAGESIZE


def can_evict() -> bool:
    return bool(platform.current().can_evict)


def evict(path: Path) -> None:
    """Ask the OS to drop the artifact's clean pages from the page cache (no-op where unsupported)."""
    if not can_evict():
        return
    for f in files_of(path):
        platform.current().evict_file(f)


def warm(path: Path) -> None:
    """Read every file of the artifact once, so its pages are cached."""
    for f in files_of(path):
        with open(f, "rb") as fh:
            while fh.read(1 << 22):
                pass
