"""A bisection run on this machine, as it is kept: its record and each step's (``regressions bisect --format json``
prints it), written as JSON under ``<data dir>/bisections/``, which the Regressions page reads back."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from siliconbench.settings import data_dir

EXIT_FOUND, EXIT_NO_REGRESSION, EXIT_UNDECIDED = 0, 1, 3


@dataclass
class Step:
    kind: str  # "ends" | "midpoint"
    commit: dict  # the revision measured (the bad end for "ends")
    sides: list[str]  # engine_versions labels, in the first round's order
    verdict: str  # ends: regression | no regression | undecided; midpoint: bad | good | undecided | skipped
    processes: int = 0  # a side
    against_good: dict | None = None  # Comparison.as_dict(): the good end (or current good) -> this commit
    against_bad: dict | None = None  # this commit -> the bad end (midpoints only)
    sweep_id: str = ""
    build: dict = field(default_factory=dict)  # build seconds, incremental, files changed
    note: str = ""


@dataclass
class Bisection:
    id: str
    source: str
    good: dict
    bad: dict
    metric: str
    min_effect: float
    commits: int  # between good (excluded) and bad (included)
    steps: list[Step] = field(default_factory=list)
    first_bad: dict | None = None
    effect: dict | None = None
    skipped: list[dict] = field(default_factory=list)
    outcome: str = ""  # found | no regression | undecided
    started_at: str = ""
    finished_at: str = ""

    @property
    def exit_code(self) -> int:
        return {"found": EXIT_FOUND, "no regression": EXIT_NO_REGRESSION}.get(self.outcome, EXIT_UNDECIDED)

    def as_dict(self) -> dict:
        return asdict(self)


def record(rec: Bisection, out_dir: Path | None, say: Callable[[str], None]) -> Bisection:
    """Finish the record and write it (``out_dir``, else the data dir's ``bisections/``)."""
    rec.finished_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    folder = out_dir or data_dir() / "bisections"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{rec.id}.json").write_text(json.dumps(rec.as_dict(), indent=2, default=str) + "\n")
    say(f"recorded in {folder / (rec.id + '.json')}")
    return rec


def load_bisections(folder: Path | None = None) -> list[dict]:
    """Every recorded bisection, newest first (the Regressions page's timeline reads these)."""
    folder = folder or data_dir() / "bisections"
    return sorted(
        (json.loads(p.read_text()) for p in folder.glob("*.json")) if folder.exists() else [],
        key=lambda d: d.get("started_at", ""),
        reverse=True,
    )
