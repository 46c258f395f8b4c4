"""One check of `siliconbench doctor`: what it looked at, how it stands, and what to do about it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    ok = "ok"
    info = "info"  # not a problem, worth knowing (no Metal on Linux, no broker configured)
    fail = "FAIL"


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""
