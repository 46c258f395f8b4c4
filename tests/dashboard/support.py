"""The dashboard under Streamlit's AppTest: run a page, find its tables and charts."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
from streamlit.testing.v1 import AppTest

from tests.page_support import TIMEOUT_S

APP = str(Path(__file__).resolve().parents[2] / "siliconbench" / "dashboard" / "app.py")


def app(page: str | None = None, **query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    if page:
        at.switch_page(f"views/{page}.py")
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


# AppTest does not expose a dataframe's key: each table is told apart by a column only it has.
TABLES = {
    "compare_table": "identity",
    "ratio_table": "prompt tok/s ×",
    "failed_table": "error",
    "sweep_table": "progress",
    "hosts_table": "worker",
    "fleet_summary": "busy",
    "samples_table": "repetition",
    "summary_table": "metric",
    "preview_jobs": "job",
    "preview_hosts": "host / queue",
}


def table(at: AppTest, key: str):
    return next(d.value for d in at.dataframe if TABLES[key] in d.value.columns)


def chart_data(chart) -> list:
    """The rows of an altair chart element (its Arrow dataset)."""
    (ds,) = chart.proto.datasets
    return pa.ipc.open_stream(io.BytesIO(ds.data.data)).read_all().to_pylist()
