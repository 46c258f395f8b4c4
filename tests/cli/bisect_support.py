"""What the bisection tests share (tests/cli/test_bisect*.py): the sweep they bisect with and the command."""

from __future__ import annotations

from sqlalchemy import select

from siliconbench.storage.database import session_scope
from siliconbench.storage.watch_tables import Bisection
from tests.cli_support import sb, write_sweep


def bisect_sweep(tmp_path, **kw):
    return write_sweep(
        tmp_path,
        name="bisect",
        engines=["llama.cpp"],
        quantizations=["Q8_0"],
        repetitions=3,
        workloads=[{"kind": "generate", "prompt_tokens": [16], "gen_tokens": [16], "depth": [0]}],
        **kw,
    )


def bisect(repo, sweep, good: str, bad: str, *more: str):
    return sb(
        "regressions", "bisect", str(sweep), "--source", str(repo), "--good", good, "--bad", bad, "--format", "json",
        *more,
    )  # fmt: skip


def kept_steps(url: str) -> int | None:
    """The id of the one bisection once it has kept a step."""
    with session_scope(url) as s:
        b = s.scalars(select(Bisection)).first()
        return b.id if b is not None and b.steps else None
