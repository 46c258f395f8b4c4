"""siliconbench: llama.cpp's Metal backend against MLX, on your models, quantizations and prompt lengths, across a
fleet of Macs. The one installed name; what is inside:

    contract      job spec, result record, metric registry, task and queue names, settings (imported by all)
    storage       tables, sessions, the result store, job state, the broker seam (below worker and coordinator)
    migrations    alembic's frozen revisions of the coordinator's database
    worker        one Mac's side: engines, builds, environments, measurement, a job's child process
    coordinator   sweeps into jobs, the fleet, history, statistics, confirmations, bisections, the watch
    embedded      worker and coordinator composed on one machine (SQLite, no broker)
    cli, dashboard  the compositions users meet

This module imports only the standard library: every part of the house imports it first.
"""

import hashlib
import os
from pathlib import Path

__version__ = "0.1.0"


def import_root() -> str:
    """The one folder a new interpreter (a job's child under an engine environment's python) puts on its path to
    import this siliconbench and nothing else of this interpreter's: the checkout when running from one, else a
    folder holding only a link to the installed package (site-packages itself would shadow the environment's own
    numpy and engine)."""
    package = Path(__file__).resolve().parent
    if (package.parent / "pyproject.toml").is_file():
        return str(package.parent)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "siliconbench"
    folder = cache / f"import-root-{hashlib.sha256(str(package).encode()).hexdigest()[:12]}"
    link = folder / "siliconbench"
    if not link.exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".siliconbench.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(package, target_is_directory=True)
        os.replace(tmp, link)  # atomic: two workers starting at once both end with the one link
    return str(folder)
