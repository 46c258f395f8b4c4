"""Memory of other processes: RSS of a process tree sampled on a thread, and the kernel's own peaks.

Sampling is portable but can miss a peak shorter than its interval; on Linux the kernel keeps an exact
per-process high-water mark (VmHWM), which `reset_hwm` / `read_hwm` use as a cross-check (through the
platform seam: None on Darwin).
"""

from __future__ import annotations

import threading
import time

import psutil

from siliconbench.worker import platform


def tree(pid: int) -> list[psutil.Process]:
    """The process and its descendants that are still alive."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _sum(procs: list[psutil.Process], field: str) -> int:
    total = 0
    for p in procs:
        try:
            info = p.memory_full_info() if field == "pss" else p.memory_info()
            total += int(getattr(info, field))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


def tree_rss(pid: int) -> int:
    return _sum(tree(pid), "rss")


def rss_of(pids: list[int]) -> int:
    return _sum([psutil.Process(p) for p in pids if psutil.pid_exists(p)], "rss")


def footprint_of(pids: list[int]) -> int | None:
    """Summed phys_footprint (Darwin: what macOS charges each process, Metal memory included, clean mapped
    file pages not); None where the OS has no such figure (Linux)."""
    values = [platform.current().phys_footprint(p) for p in pids if psutil.pid_exists(p)]
    return None if not values or any(v is None for v in values) else sum(values)


def pss_of(pids: list[int]) -> int | None:
    """Proportional set size summed (shared pages split between their users); None where the OS has none."""
    values = [platform.current().pss(p) for p in pids if psutil.pid_exists(p)]
    return None if any(v is None for v in values) else sum(values)


def reset_hwm(pids: list[int]) -> bool:
    """Reset each process's kernel-kept peak RSS; False where that is impossible (not Linux, not ours)."""
    return all([platform.current().reset_peak_rss(pid) for pid in pids])


def read_hwm(pids: list[int]) -> int | None:
    """Sum of the processes' peak RSS since the last reset (VmHWM), or None where the OS keeps none."""
    total = 0
    for pid in pids:
        peak = platform.current().peak_rss(pid)
        if peak is None:
            return None
        total += peak
    return total


class PeakSampler:
    """Samples the RSS of ``pid``'s process tree every ``interval_s`` on a thread; ``stop()`` returns the peak.
    On Darwin the tree's summed phys_footprint is sampled alongside (``footprint_peak``; None elsewhere)."""

    def __init__(self, pid: int, interval_s: float):
        self.pid, self.interval_s = pid, interval_s
        self.peak = 0
        self.footprint_peak: int | None = None
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        procs = tree(self.pid)
        next_t = time.perf_counter()
        while not self._stop.is_set():
            if self.samples % 50 == 0:  # children may appear (worker threads are not processes, forks are)
                procs = tree(self.pid) or procs
            self.peak = max(self.peak, _sum(procs, "rss"))
            fp = footprint_of([p.pid for p in procs])
            if fp is not None:
                self.footprint_peak = max(self.footprint_peak or 0, fp)
            self.samples += 1
            next_t += self.interval_s
            self._stop.wait(max(0.0, next_t - time.perf_counter()))

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> int:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.peak = max(self.peak, tree_rss(self.pid))  # one last sample at the end of the window
        return self.peak


class TreeWindow:
    """One measured window of a server's process tree (a burst, a run): the peak RSS and footprint sampled every
    ``interval_s`` (PeakSampler) and, where the OS keeps one, the kernel's high-water mark reset at the window's
    start and read at its end, as a cross-check of the sampling. ``hwm_ok``: whether every earlier window could
    reset it (once not, the kernel's figure is left out from then on)."""

    def __init__(self, pid: int, interval_s: float, hwm_ok: bool = True):
        self.pids = [q.pid for q in tree(pid)]
        self.sampler = PeakSampler(pid, interval_s)
        self.hwm_ok = hwm_ok
        self.hwm: int | None = None

    def __enter__(self) -> TreeWindow:
        self.hwm_ok = reset_hwm(self.pids) and self.hwm_ok
        self.sampler.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.sampler.__exit__(*exc)
        self.hwm = read_hwm(self.pids) if self.hwm_ok else None

    def figures(self) -> dict:
        """The window's server_*_bytes samples (siliconbench.contract.metrics)."""
        return {
            "server_peak_rss_bytes": self.sampler.peak,
            "server_hwm_rss_bytes": self.hwm,
            "server_peak_footprint_bytes": self.sampler.footprint_peak,
        }
