"""The dashboard tests' fixtures: the database the dashboard is pointed at (seeded or empty), a real browser."""

from __future__ import annotations

import pytest
from playwright import sync_api  # a dev dependency: the bootstrap installs it

from tests.dashboard.browser import ARGS, CHROMIUM, WAIT_MS
from tests.dashboard_seed import seed
from tests.page_support import point_dashboard_at


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


@pytest.fixture
def url(empty_db, tmp_path, monkeypatch, models_dir):
    """An empty, migrated database the dashboard is pointed at (SILICONBENCH_*), no broker."""
    point_dashboard_at(empty_db, monkeypatch, tmp_path)
    monkeypatch.setenv("SILICONBENCH_MODELS_DIR", str(models_dir))
    monkeypatch.delenv("SILICONBENCH_BROKER_URL", raising=False)
    return empty_db


@pytest.fixture
def seeded(url):
    return {"url": url, **seed(url)}
