"""A real Chromium driven by Playwright against a real `streamlit run` of the dashboard: start, open, read tables."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


# Debian's chromium, or the browser SILICONBENCH_CHROMIUM names (a Mac's Chromium.app; scripts/test_deps.sh).
CHROMIUM = os.environ.get("SILICONBENCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


WAIT_MS = 60_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(tmp_path: Path, url: str, models_dir: Path):
    """Start `siliconbench dashboard` on a free port; returns (process, base URL) once it answers."""
    port = free_port()
    env = {
        **os.environ,
        "SILICONBENCH_DATABASE_URL": url,
        "SILICONBENCH_MODELS_DIR": str(models_dir),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
    }
    env.pop("SILICONBENCH_BROKER_URL", None)
    log = open(tmp_path / "dashboard.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "siliconbench.cli.main", "dashboard", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log_text = (tmp_path / "dashboard.log").read_text()
            raise RuntimeError(f"the dashboard exited with {proc.returncode}: {log_text}")
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return proc, base
        except OSError:
            time.sleep(0.2)  # polling a socket that is not listening yet, not waiting for content
    stop(proc)
    raise RuntimeError("the dashboard did not answer within 60 s")


def stop(proc: subprocess.Popen) -> None:
    """Terminate the server we started, by its PID (the CLI exec'd Streamlit, so the PID is Streamlit's)."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def open_page(page, base: str, path: str, title: str) -> None:
    page.goto(base + path)
    page.get_by_role("heading", name=title, level=1).wait_for()


def table_cells(page, index: int = 0) -> list[str]:
    """The text of a rendered st.dataframe's cells (the grid keeps an accessible copy of what it drew)."""
    sel = "[data-testid='stDataFrame']"
    page.wait_for_function(
        f"(i) => document.querySelectorAll(\"{sel}\")[i]?.querySelector('[data-testid=glide-cell-0-0]')", arg=index
    )
    return page.eval_on_selector_all(
        sel, "(els, i) => [...els[i].querySelectorAll('[data-testid^=glide-cell]')].map(c => c.textContent)", index
    )


def chart_marks(page, index: int = 0) -> int:
    """Drawn marks (bars, points, lines) in a rendered Vega-Lite chart, waiting until there are some."""
    marks = "svg .mark-rect path, svg .mark-symbol path, svg .mark-line path"
    js = f"(i) => document.querySelectorAll('[data-testid=stVegaLiteChart]')[i]?.querySelectorAll('{marks}').length"
    page.wait_for_function(js, arg=index)
    return page.evaluate(js, index)


def shot(page, path: Path) -> Path:
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 20_000  # a blank page compresses to a few KiB
    return path
