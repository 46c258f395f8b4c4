"""`siliconbench dashboard`: serve the Streamlit dashboard (127.0.0.1 by default).

Streamlit is started as its own program (exec), never imported here: the CLI must work on a worker
host that has no dashboard dependencies.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import typer

from siliconbench.contract.dashboard_access import Writes, check_serving
from siliconbench.contract.errors import UserError

from .common import settings, user_errors


def app_path() -> Path:
    """siliconbench/dashboard/serve.py: app.py as an st.App, which takes the login's secrets from the environment."""
    spec = importlib.util.find_spec("siliconbench.dashboard")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise UserError("dashboard", "the dashboard package is not installed with this siliconbench.")
    return Path(list(spec.submodule_search_locations)[0]) / "serve.py"


def streamlit_argv(host: str, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app_path()),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--global.developmentMode",
        "false",
        "--client.toolbarMode",
        "minimal",
    ]


@user_errors
def dashboard(
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        help="Address to bind; 0.0.0.0 exposes it to the network (then SILICONBENCH_OIDC_* or --read-only)",
    ),
    port: int = typer.Option(8501, "--port", min=1, max=65535, help="Port to serve on"),
    read_only: bool = typer.Option(
        False, "--read-only", help="No write action for anyone (as SILICONBENCH_DASHBOARD_READ_ONLY=1)"
    ),
) -> None:
    """Serve the dashboard: compare results, submit sweeps, watch the fleet."""
    if read_only:
        os.environ["SILICONBENCH_DASHBOARD_READ_ONLY"] = "1"  # the pages read it in the exec'd Streamlit
    writes = check_serving(host, settings())  # a bad SILICONBENCH_* value is one clear error here, not in the browser
    if importlib.util.find_spec("streamlit") is None:
        raise UserError("dashboard", "Streamlit is not installed; `pip install 'siliconbench[dashboard]'`.")
    if writes is Writes.LOGIN and importlib.util.find_spec("authlib") is None:
        raise UserError(
            "SILICONBENCH_OIDC_METADATA_URL",
            "a dashboard login needs Authlib; `pip install 'siliconbench[dashboard]'`.",
        )
    argv = streamlit_argv(host, port)
    sys.stdout.flush()
    os.execv(argv[0], argv)  # Streamlit takes over this process (same PID, signals go straight to it)
