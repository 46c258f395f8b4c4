"""Running a dashboard page under Streamlit's AppTest against a database: the one preamble every page test
shares (the database the page reads, a private data folder, loopback serving, no cached data from another test).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 60


def point_dashboard_at(url: str, monkeypatch, tmp_path: Path) -> None:
    """Point the dashboard at ``url`` (SILICONBENCH_DATABASE_URL), with its data folder under ``tmp_path``."""
    monkeypatch.setenv("SILICONBENCH_DATABASE_URL", url)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    st.config.set_option("server.address", "127.0.0.1")  # AppTest binds nothing: as served on loopback, no login
    st.cache_data.clear()
    st.cache_resource.clear()


def run_page(page: str, url: str, monkeypatch, tmp_path: Path) -> AppTest:
    """One page (``siliconbench/dashboard/views/<page>.py``) run once against ``url``; it raised nothing."""
    point_dashboard_at(url, monkeypatch, tmp_path)
    at = AppTest.from_file(
        str(ROOT / "siliconbench" / "dashboard" / "views" / f"{page}.py"), default_timeout=TIMEOUT_S
    ).run()
    assert not at.exception, at.exception
    return at
