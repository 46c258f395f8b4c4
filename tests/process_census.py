"""Where `make test`'s CPU goes by kind of process (job children, workers, CLI calls, llama-bench, PostgreSQL ...):
the kernel's process accounting (every process that exits, its CPU) joined by pid with a census of this venv's
Python processes (each one's command line, written as it starts). tests/cpu_cost.py says which *tests* cost; this
says which *processes*.

    sudo .venv/bin/python -m tests.process_census start /tmp/census     # accounting on, the venv's start hook in
    make test
    sudo .venv/bin/python -m tests.process_census stop /tmp/census      # accounting off, the hook out
    .venv/bin/python -m tests.process_census report /tmp/census

Needs root (``accton``) and Debian's ``acct`` package (``dump-acct``). The hook is a ``.pth`` file in the venv's
site-packages: every Python start of the venv appends ``pid, ppid, command line`` to ``<dir>/python.log``. Processes
still running at ``stop`` are not counted, and a pid the kernel reused in between is attributed to its last command.
"""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
from collections import defaultdict
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(add_completion=False, help=__doc__.split("\n\n")[0])
HOOK = "_sb_census"
HOOK_SOURCE = '''"""siliconbench's process census (tests/process_census.py): this process's pid and command line, as it starts."""
import os
try:
    with open("/proc/self/cmdline", "rb") as f:
        cmd = f.read().replace(b"\\0", b" ").decode(errors="replace").strip()[:300]
    fd = os.open({log!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    os.write(fd, f"{{os.getpid()}}\\t{{os.getppid()}}\\t{{cmd}}\\n".encode())
    os.close(fd)
except Exception:
    pass
'''
# A Python process's kind by its command line, first match wins; a CLI call by its command; the rest "python: other".
KINDS = (
    ("job child", r"siliconbench\.worker\.job\.child_main"),
    ("pytest", r"-m pytest|exec\(eval"),  # xdist's workers start through execnet's exec(eval(...))
    ("fleet worker", r"(siliconbench|cli\.main) worker\b"),
    ("scheduler", r"(siliconbench|cli\.main) scheduler\b"),
    ("llama_cpp.server", r"llama_cpp\.server"),
    ("mlx_lm server", r"mlx_lm[. ]server"),
    ("streamlit", r"streamlit"),
    ("benchmark script", r"benchmarks[/.]"),
    ("pip", r"-m pip\b|/pip |pip-runner|pyproject_hooks"),
)


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


@app.command()
def start(folder: Path) -> None:
    """Turn process accounting on into FOLDER/pacct and put the census hook into this venv."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "python.log").unlink(missing_ok=True)
    (folder / "pacct").write_bytes(b"")
    site = _site_packages()
    (site / f"{HOOK}.py").write_text(HOOK_SOURCE.format(log=str((folder / "python.log").resolve())))
    (site / f"zz{HOOK}.pth").write_text(f"import {HOOK}\n")
    subprocess.run(["accton", str(folder / "pacct")], check=True)


@app.command()
def stop(folder: Path) -> None:
    """Turn process accounting off and take the hook out of this venv."""
    subprocess.run(["accton", "off"], check=True)
    site = _site_packages()
    (site / f"zz{HOOK}.pth").unlink(missing_ok=True)
    (site / f"{HOOK}.py").unlink(missing_ok=True)


def kind_of(command: str) -> str:
    for name, pattern in KINDS:
        if re.search(pattern, command):
            return name
    cli = re.search(r"(?:bin/siliconbench|siliconbench\.cli\.main)\s+(\S+)", command)
    return f"CLI: {cli.group(1)}" if cli else "python: other"


def tally(accounting: str, commands: dict[int, str]) -> dict[str, list[float]]:
    """kind -> [processes, CPU seconds] from ``dump-acct``'s lines (comm|version|utime|stime|... |pid|ppid|...)."""
    kinds: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for line in accounting.splitlines():
        f = [x.strip() for x in line.split("|")]
        if len(f) < 11:
            continue
        comm, cpu, pid = f[0], (float(f[2]) + float(f[3])) / 100, int(f[9])  # ticks of 1/100 s (AHZ)
        if comm.startswith("python"):
            kind = kind_of(commands[pid]) if pid in commands else "python, not this venv's"
        else:
            kind = comm
        kinds[kind][0] += 1
        kinds[kind][1] += cpu
    return kinds


@app.command()
def report(folder: Path, top: int = typer.Option(25, help="Kinds shown")) -> None:
    """CPU seconds by kind of process, costliest first."""
    commands = {}
    for line in (folder / "python.log").read_text(errors="replace").splitlines():
        pid, _ppid, command = (line.split("\t", 2) + ["", ""])[:3]
        if pid.isdigit():
            commands[int(pid)] = command
    dumped = subprocess.run(["dump-acct", str(folder / "pacct")], capture_output=True, text=True, check=True).stdout
    kinds = tally(dumped, commands)
    total = sum(cpu for _n, cpu in kinds.values())
    table = Table(title=f"{total:,.0f} CPU seconds of the processes that exited, by kind")
    for col in ("kind", "processes", "CPU s", "share", "CPU s each"):
        table.add_column(col, justify="left" if col == "kind" else "right")
    for kind, (n, cpu) in sorted(kinds.items(), key=lambda kv: -kv[1][1])[:top]:
        table.add_row(kind, f"{n:,}", f"{cpu:,.1f}", f"{cpu / total:.1%}", f"{cpu / n:.2f}")
    Console().print(table)


if __name__ == "__main__":
    sys.exit(app())
