"""macOS command outputs recorded on real Macs (tests/data/darwin/SOURCES.md), replayed behind the platform seam."""

from __future__ import annotations

from pathlib import Path

from siliconbench.worker.platform.darwin import Commands

DATA = Path(__file__).resolve().parents[1] / "data" / "darwin"


def recorded(name: str) -> str:
    return (DATA / name).read_text()


class Recorded(Commands):
    """Replays recorded outputs: ``sysctl -n KEY`` is answered from recorded ``key: value`` sysctl lines
    (the value is what ``-n`` prints), any other argv from a recorded file; unknown ones print nothing,
    as sysctl does on stdout for an unknown oid."""

    def __init__(self, sysctl: tuple[str, ...] = (), outputs: dict | None = None, rusage=None):
        self.values: dict[str, str] = {}
        for name in sysctl:
            for line in recorded(name).splitlines():
                key, _, value = line.partition(":")
                self.values[key] = value.strip()
        self.outputs = {argv: recorded(name) for argv, name in (outputs or {}).items()}
        self.rusage_fill = rusage
        self.calls: list[tuple] = []

    def run(self, argv):
        self.calls.append(tuple(argv))
        if argv[:2] == ["sysctl", "-n"]:
            return self.values[argv[2]] + "\n" if argv[2] in self.values else ""
        return self.outputs.get(tuple(argv), "")

    def proc_pid_rusage(self, pid, flavor, info):
        self.calls.append(("proc_pid_rusage", pid, flavor))
        return self.rusage_fill(pid, flavor, info) if self.rusage_fill else -1
