"""The worker's secrets file: KEY="value" lines, mode 0600, read by systemd and by the worker itself.

Broker and database URLs carry passwords; a LaunchAgent plist and a systemd unit are world-readable
files, so those values live here instead. systemd reads the file natively (``EnvironmentFile=``);
launchd has no such key, so the plist names the file in ``SILICONBENCH_ENV_FILE`` and
``siliconbench worker`` loads it before reading its settings.

One syntax both readers agree on: every value double-quoted, with ``\\``, ``"``, `` ` `` and ``$``
backslash-escaped (systemd.exec(5), EnvironmentFile=: no variable expansion, quotes keep whitespace).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

log = logging.getLogger(__name__)

ENV_FILE_VAR = "SILICONBENCH_ENV_FILE"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ESCAPED = '\\"`$'


def quote(value: str) -> str:
    if "\n" in value or "\r" in value or "\0" in value:
        raise ValueError("a value in the worker's environment file cannot hold a newline or NUL")
    return '"' + "".join("\\" + c if c in _ESCAPED else c for c in value) + '"'


def render(values: dict[str, str]) -> str:
    lines = ["# Written by `siliconbench worker install`: settings that carry passwords (mode 0600)."]
    for key, value in values.items():
        if not _NAME.match(key):
            raise ValueError(f"not an environment variable name: {key!r}")
        lines.append(f"{key}={quote(value)}")
    return "\n".join(lines) + "\n"


def write(path: Path, values: dict[str, str]) -> Path:
    """Write the file with mode 0600 from its creation on (never readable by others, not even briefly)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(render(values))
    os.replace(tmp, path)
    return path


def parse(text: str) -> dict[str, str]:
    """The assignments of an environment file: what ``render`` writes, bare values and '...' too."""
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        key, sep, rest = line.partition("=")
        key = key.strip()
        if not sep or not _NAME.match(key):
            raise ValueError(f"line {n}: expected KEY=value")
        rest = rest.strip()
        if rest[:1] == '"':
            value, i = [], 1
            while i < len(rest) and rest[i] != '"':
                if rest[i] == "\\" and i + 1 < len(rest):
                    i += 1
                    if rest[i] not in _ESCAPED:
                        value.append("\\")
                value.append(rest[i])
                i += 1
            if i >= len(rest):
                raise ValueError(f"line {n}: unterminated double quote")
            out[key] = "".join(value)
        elif rest[:1] == "'":
            end = rest.find("'", 1)
            if end < 0:
                raise ValueError(f"line {n}: unterminated single quote")
            out[key] = rest[1:end]
        else:
            out[key] = rest
    return out


def load(path: str | os.PathLike | None, environ: dict | None = None) -> list[str]:
    """Put the file's variables into the environment where not already set; the names loaded.

    A file others can read is still loaded (the service must start) but logged as a warning.
    """
    if not path:
        return []
    environ = os.environ if environ is None else environ
    p = Path(path)
    if p.stat().st_mode & 0o077:
        log.warning("%s is readable by other users; it holds passwords: chmod 600 %s", p, p)
    loaded = []
    for key, value in parse(p.read_text()).items():
        if key not in environ:
            environ[key] = value
            loaded.append(key)
    return loaded
