"""Selectors: which points compare and regressions take. Comma-separated ``key=value`` terms that must all hold
(``mlx-lm=0.31.3,host=mac-mini-1``); values may use ``*`` globs. The keys are the point's own fields (sweep, host,
engine, model, quant, source, job, a date range, version) and the names of its components (the versions that can
move a number: ``points.components``); a key that names nothing known is an error, never an empty match.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from siliconbench.contract.errors import UserError

from siliconbench.coordinator.history.points import Point

FIXED_KEYS = ("sweep", "host", "engine", "model", "quant", "source", "job", "since", "until", "date", "version")


@dataclass(frozen=True)
class Selector:
    text: str
    terms: tuple[tuple[str, str], ...]

    def keys(self) -> set[str]:
        return {k for k, _ in self.terms}

    def value(self, key: str) -> str | None:
        return next((v for k, v in self.terms if k == key), None)


def parse_selector(text: str | None, field: str = "selector") -> Selector:
    terms = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        k, sep, v = part.partition("=")
        if not sep or not k.strip() or not v.strip():
            raise UserError(
                field,
                f"{part!r} is not key=value; e.g. mlx-lm=0.31.3, host=mac-mini-1, sweep=nightly-*, since=2026-11-01.",
            )
        terms.append((k.strip().lower(), v.strip()))
    return Selector(text or "", tuple(terms))


def _day(v: str, field: str) -> datetime:
    try:
        d = datetime.fromisoformat(v)
    except ValueError:
        raise UserError(field, f"{v!r} is not a date (YYYY-MM-DD or an ISO date-time).") from None
    return d.replace(tzinfo=UTC) if d.tzinfo is None else d


def _is_date_only(v: str) -> bool:
    try:
        date.fromisoformat(v)
        return True
    except ValueError:
        return False


def _match(pattern: str, value: str | None, prefix: bool = False) -> bool:
    if value is None:
        return False
    if fnmatch.fnmatchcase(value, pattern) or fnmatch.fnmatchcase(value.lower(), pattern.lower()):
        return True
    return prefix and len(pattern) >= 4 and value.startswith(pattern)


def matches(sel: Selector, p: Point, field: str = "selector") -> bool:
    for k, v in sel.terms:
        if k == "sweep":
            ok = _match(v, p.sweep_id) or _match(v, p.sweep_name)
        elif k in ("host", "engine", "model", "quant", "source"):
            ok = _match(
                v, {"host": p.host, "engine": p.engine, "model": p.model, "quant": p.quant, "source": p.source}[k]
            )
        elif k == "job":
            ok = p.job_id.startswith(v)
        elif k in ("since", "until", "date"):
            t = _day(v, field)
            start = t if k != "until" else None
            end = (t + timedelta(days=1)) if k == "date" or (k == "until" and _is_date_only(v)) else t
            if k == "since":
                ok = p.when >= start
            elif k == "until":
                ok = p.when < end
            else:
                ok = start <= p.when < end
        elif k == "version":
            build = p.components.get("build")
            ok = (
                _match(v, p.engine_package_version)
                or _match(v, p.engine_version)
                or _match(v, p.components.get("llama.cpp"), prefix=True)
                or (build is not None and v == f"b{build}")
            )
        else:
            ok = _match(v, p.components.get(k), prefix=k == "llama.cpp")
        if not ok:
            return False
    return True


def check_keys(selectors: list[tuple[str, Selector]], points: list[Point]) -> None:
    """A selector key that names nothing known is an error naming the valid keys (never an empty match)."""
    known = set(FIXED_KEYS) | {k for p in points for k in p.components}
    for where, sel in selectors:
        for k in sel.keys():
            if k not in known:
                raise UserError(where, f"unknown selector key {k!r}.", sorted(known))


def select(points: list[Point], sel: Selector, field: str = "selector") -> list[Point]:
    return [p for p in points if matches(sel, p, field)]
