"""The dashboard in a real browser: `siliconbench dashboard` serving on 127.0.0.1, headless Chromium
driven by Playwright, waiting for content (never a fixed sleep) and checking each page drew its table
or chart. The journey: an empty database -> a sweep submitted in the browser form -> its comparison chart.

Set SILICONBENCH_UPDATE_SCREENSHOT=1 to write the journey's Compare page to docs/compare.png.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from siliconbench.storage import database as db
from tests.cli_support import sb
from tests.conftest import SMALL, in_ci
from tests.dashboard.browser import CHROMIUM, ROOT, chart_marks, open_page, serve, shot, stop, table_cells
from tests.dashboard_seed import seed

if not Path(CHROMIUM).exists():
    if in_ci():
        pytest.fail(f"{CHROMIUM} is missing in CI (scripts/test_deps.sh installs it)", pytrace=False)
    pytest.skip(f"{CHROMIUM} is not installed (`make test` installs it or says how)", allow_module_level=True)


@pytest.fixture
def sqlite_db(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'browser.sqlite'}"
    db.upgrade(url)
    yield url
    db.dispose(url)


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
        summary, cells = table_cells(page, 0), table_cells(page, 1)  # hosts by SKU and state, then a page of hosts
        assert any(c.startswith("Apple M2 Ultra") for c in summary)
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
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-testid^=glide-cell]')].some(c => c.textContent === 'done')",
            timeout=180_000,
        )

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


def test_serving_page_draws_each_engines_latency_curve_with_the_objective(tmp_path, sqlite_db, models_dir, page):
    """A real serve sweep (both engines' servers, two rates) run by `siliconbench run` into the dashboard's database,
    then the Serving page in Chromium: a curve per engine in both panels, the objective's dashed rule, the table."""
    sweep = tmp_path / "serve.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {
                "name": "serving-curves",
                "models": [SMALL],
                "engines": ["llama.cpp", "mlx"],
                "quantizations": ["full"],
                "repetitions": 1,
                "warmup": 0,
                "workloads": [
                    {
                        "kind": "serve",
                        "request_rate": [4],
                        "num_requests": 4,
                        "prompt_tokens": 16,
                        "max_tokens": 4,
                        "slo": {"ttft_ms": 5000, "tpot_ms": 250},
                    },
                    {  # a concurrency sweep: closed loops at 1 and 2 in flight, drawn as the Pareto view
                        "kind": "serve",
                        "max_concurrency": [1, 2],
                        "num_requests": 4,
                        "prompt_tokens": 16,
                        "max_tokens": 4,
                        "slo": {"ttft_ms": 5000, "tpot_ms": 250},
                    },
                ],
            }
        )
    )
    env = {"SILICONBENCH_DATABASE_URL": sqlite_db, "SILICONBENCH_MODELS_DIR": str(models_dir)}
    ran = sb("run", str(sweep), env={**env, "XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "serving at request rates" in ran.stdout
    proc, base = serve(tmp_path, sqlite_db, models_dir)
    try:
        open_page(page, base, "/serving", "Serving")
        # 2 series x 3 jobs x 2 panels of points, a line per series per panel (and the Pareto view's own)
        assert chart_marks(page) >= 12
        rules = page.evaluate(
            "() => document.querySelectorAll('[data-testid=stVegaLiteChart] svg .mark-rule.role-mark line').length"
        )
        assert rules == 2  # the TTFT and the TPOT objective
        cells = table_cells(page)
        assert any("llama-server ×4" in c for c in cells) and any("mlx_lm.server" in c for c in cells)
        assert "all at once" in cells
        # the concurrency sweep's Pareto view: throughput against each tail, a frontier line per series
        page.get_by_text("Concurrency sweep: throughput against tail latency").wait_for()
        charts = page.evaluate("() => document.querySelectorAll('[data-testid=stVegaLiteChart]').length")
        assert charts == 2
        shot(page, tmp_path / "serving.png")
        if os.environ.get("SILICONBENCH_UPDATE_SCREENSHOT") == "1":
            shutil.copyfile(tmp_path / "serving.png", ROOT / "docs" / "serving.png")
    finally:
        stop(proc)
