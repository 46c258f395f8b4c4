"""The dashboard in a real browser: `siliconbench dashboard` serving on 127.0.0.1, headless Chromium
driven by Playwright, waiting for content (never a fixed sleep) and checking each page drew its table
or chart. The journey: an empty database -> a sweep submitted in the browser form -> its comparison chart.

Set SILICONBENCH_UPDATE_SCREENSHOT=1 to write the journey's Compare page to docs/compare.png.
"""

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

import pytest
from playwright import sync_api  # a dev dependency: the bootstrap installs it

from storage import database as db

from .conftest import SMALL, in_ci
from .dashboard_seed import seed

ROOT = Path(__file__).resolve().parent.parent
# Debian's chromium, or the browser SILICONBENCH_CHROMIUM names (a Mac's Chromium.app; scripts/test_deps.sh).
CHROMIUM = os.environ.get("SILICONBENCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
WAIT_MS = 60_000

if not Path(CHROMIUM).exists():
    if in_ci():
        pytest.fail(f"{CHROMIUM} is missing in CI (scripts/test_deps.sh installs it)", pytrace=False)
    pytest.skip(f"{CHROMIUM} is not installed (`make test` installs it or says how)", allow_module_level=True)



def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(tmp_path: Path, url: str, models_dir: Path):
    """Start `siliconbench dashboard` on a free port; returns (process, base URL) once it answers."""
    port = free_port()
    env = {**os.environ, "SILICONBENCH_DATABASE_URL": url, "SILICONBENCH_MODELS_DIR": str(models_dir),
           "XDG_DATA_HOME": str(tmp_path / "xdg")}
    env.pop("SILICONBENCH_BROKER_URL", None)
    log = open(tmp_path / "dashboard.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "cli.main", "dashboard", "--port", str(port)],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
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


@pytest.fixture
def sqlite_db(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'browser.sqlite'}"
    db.upgrade(url)
    yield url
    db.dispose(url)


@pytest.fixture
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    pg = browser.new_page(viewport={"width": 1400, "height": 1250})  # Streamlit scrolls inside: this is the shot
    pg.set_default_timeout(WAIT_MS)
    yield pg
    pg.close()


def open_page(page, base: str, path: str, title: str) -> None:
    page.goto(base + path)
    page.get_by_role("heading", name=title, level=1).wait_for()


def table_cells(page, index: int = 0) -> list[str]:
    """The text of a rendered st.dataframe's cells (the grid keeps an accessible copy of what it drew)."""
    sel = "[data-testid='stDataFrame']"
    page.wait_for_function(
        f"(i) => document.querySelectorAll(\"{sel}\")[i]?.querySelector('[data-testid=glide-cell-0-0]')", arg=index)
    return page.eval_on_selector_all(sel, "(els, i) => [...els[i].querySelectorAll('[data-testid^=glide-cell]')]"
                                          ".map(c => c.textContent)", index)


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


def test_every_page_renders_its_table_or_chart(tmp_path, sqlite_db, models_dir, page):
    ids = seed(sqlite_db)
    proc, base = serve(tmp_path, sqlite_db, models_dir)
    try:
        open_page(page, base, "/", "Compare")
        cells = table_cells(page)
        assert "3,456.1 ± 10.0" in cells and "llama.cpp 0.3.35" in cells and "mlx 0.32.2" in cells
        assert chart_marks(page) >= 3
        shot(page, tmp_path / "compare.png")

        open_page(page, base, "/sweeps", "Sweeps")
        assert {"laptop-mbp", "again-studio", "first-studio", "done"} <= set(table_cells(page))
        page.get_by_role("textbox", name="Prompt lengths").wait_for()
        shot(page, tmp_path / "sweeps.png")

        open_page(page, base, "/fleet", "Fleet")
        cells = table_cells(page)
        assert "studio" in cells and "mbp" in cells and "Apple M2 Ultra" in cells
        shot(page, tmp_path / "fleet.png")

        open_page(page, base, f"/result?job={ids['failed_job']}", "Result detail")
        page.get_by_text("engine error: out of memory while loading").wait_for()
        page.locator("[data-testid='stCode']").get_by_text("error: out of memory").wait_for()
        shot(page, tmp_path / "result.png")
    finally:
        stop(proc)


def test_journey_empty_database_to_comparison_chart(tmp_path, sqlite_db, models_dir, page):
    proc, base = serve(tmp_path, sqlite_db, models_dir)
    try:
        open_page(page, base, "/", "Compare")
        page.get_by_text("No results yet").wait_for()
        page.get_by_role("link", name="Sweeps").first.click()
        page.get_by_role("heading", name="Sweeps", level=1).wait_for()

        page.get_by_role("textbox", name="Name", exact=True).fill("journey")
        page.get_by_role("textbox", name="Prompt lengths").fill("16, 32")
        page.get_by_role("textbox", name="Generated tokens").fill("4")
        page.get_by_role("spinbutton", name="Repetitions").fill("3")
        page.get_by_role("button", name="Preview").click()
        page.get_by_text("Preview of journey").wait_for()
        assert f"llama.cpp {SMALL} F32 p32 g4 d0" in table_cells(page)  # level full on Linux: F32 with f32

        page.get_by_role("button", name="Run on this machine: 4 jobs").click()
        page.get_by_text("submitted: 4 jobs").wait_for()
        # The sweep list polls every 2 s; wait until it reports the sweep done.
        page.wait_for_function("() => [...document.querySelectorAll('[data-testid^=glide-cell]')]"
                               ".some(c => c.textContent === 'done')", timeout=180_000)

        page.get_by_role("link", name="Compare").first.click()
        page.get_by_role("heading", name="Compare", level=1).wait_for()
        cells = table_cells(page)
        assert any(c.startswith("llama.cpp ") for c in cells) and any(c.startswith("mlx ") for c in cells)
        assert sum(c.startswith(f"{SMALL} full · p") for c in cells) == 4
        assert chart_marks(page) >= 4  # one bar per series
        png = shot(page, tmp_path / "journey-compare.png")
        if os.environ.get("SILICONBENCH_UPDATE_SCREENSHOT") == "1":
            (ROOT / "docs").mkdir(exist_ok=True)
            shutil.copyfile(png, ROOT / "docs" / "compare.png")
    finally:
        stop(proc)
