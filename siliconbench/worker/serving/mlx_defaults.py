"""The installed mlx_lm.server's own defaults for how it batches, asked of mlx_lm itself: its parser (built inside
``main()``, so caught as ``main()`` parses) and ``TimeBudget``'s signature. Asked in a fresh interpreter, so the
job's process never imports MLX, and once per interpreter and mlx-lm version.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version

ASK_TIMEOUT_S = 60
UNKNOWN = {"decode_concurrency": None, "prompt_concurrency": None, "time_slice_s": None}

# mlx_lm.server.main() builds its parser and parses sys.argv: stop it there, with the parser in hand.
_ASK = """
import argparse, inspect, json, sys

class Parsed(Exception):
    pass

def caught(self, *args, **kwargs):
    raise Parsed(self)

argparse.ArgumentParser.parse_args = caught
import mlx_lm.server as server

sys.argv = ["mlx_lm.server"]
try:
    server.main()
    parser = None
except Parsed as stop:
    parser = stop.args[0]
budget = inspect.signature(server.TimeBudget.__init__).parameters.get("budget") if hasattr(server, "TimeBudget") else None
print(json.dumps({
    "decode_concurrency": parser.get_default("decode_concurrency") if parser else None,
    "prompt_concurrency": parser.get_default("prompt_concurrency") if parser else None,
    "time_slice_s": budget.default if budget is not None and budget.default is not inspect.Parameter.empty else None,
}))
"""


def mlx_server_defaults(python: str | None = None) -> dict:
    """--decode-concurrency and --prompt-concurrency defaults of the installed mlx_lm.server and its batch time slice
    (its generation thread runs the batch for TimeBudget(budget=...) seconds before it looks at new requests); None
    where this mlx-lm has no such thing or cannot be asked."""
    try:
        installed = version("mlx-lm")
    except PackageNotFoundError:
        return dict(UNKNOWN)
    return dict(_asked(python or sys.executable, installed))


@functools.cache
def _asked(python: str, _installed: str) -> tuple:
    try:
        out = subprocess.run([python, "-c", _ASK], capture_output=True, text=True, timeout=ASK_TIMEOUT_S)
        found = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        found = {}
    return tuple({**UNKNOWN, **{k: v for k, v in found.items() if k in UNKNOWN}}.items())
