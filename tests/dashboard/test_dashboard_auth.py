"""Who may do what in the dashboard: reading is open, writing needs a login wherever one is configured.

The journey runs `siliconbench dashboard` with SILICONBENCH_OIDC_* pointing at a real OpenID Connect
provider (tests/oidc_provider.py, Authlib's server components) started on a free loopback port, and logs
in through it in headless Chromium. The refusal is the real CLI; the other policies are pages under AppTest.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import pytest
import streamlit as st
from playwright import sync_api
from streamlit.testing.v1 import AppTest

from siliconbench.contract.dashboard_access import Writes, check_serving, writes
from siliconbench.contract.errors import UserError
from siliconbench.contract.settings import Settings
from siliconbench.contract.spec import SweepSpec

from siliconbench.coordinator.history.load import load_points
from siliconbench.coordinator.history.regressions import find_steps, save_findings
from siliconbench.storage import sweep_store
from siliconbench.storage.database import session_scope
from tests.dashboard.browser import ARGS, CHROMIUM, ROOT, WAIT_MS, free_port, open_page, stop, table_cells
from tests.dashboard_seed import job, seed
from tests.history_seed import history

OIDC = {
    "SILICONBENCH_OIDC_CLIENT_ID": "siliconbench-dashboard",
    "SILICONBENCH_OIDC_CLIENT_SECRET": "s3cret-for-tests",
    "SILICONBENCH_OIDC_COOKIE_SECRET": "a-cookie-secret-long-enough-for-hs256",
}


def wait_http(url: str, proc: subprocess.Popen, what: str, log) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)  # polling a socket that is not listening yet, not waiting for content
    raise RuntimeError(f"{what} did not answer within 60 s: {log.read_text()}")


def start(argv: list[str], env: dict, log, health: str, what: str) -> subprocess.Popen:
    with open(log, "wb") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_http(health, proc, what, log)
    except BaseException:
        stop(proc)
        raise
    return proc


@pytest.fixture
def served(tmp_path, sqlite_url, models_dir):
    """A real provider and `siliconbench dashboard` logging in through it, over seeded data with a queued sweep
    (something to cancel) and a finding of this host (something to confirm). Yields (dashboard, provider) URLs."""
    seed(sqlite_url)
    pending = job("pending-studio", 0, "mlx", 128)
    with session_scope(sqlite_url) as s:  # created, never run: queued, so cancellable
        sweep_store.create_sweep(s, pending.sweep_id, SweepSpec(name="pending", models=[pending.model]), [pending])
    history(sqlite_url, models_dir, confirmable=True)
    with session_scope(sqlite_url) as s:
        save_findings(s, find_steps(load_points(s), metrics=("decode_tps",)))
    idp_port, dash_port = free_port(), free_port()
    dash, issuer = f"http://127.0.0.1:{dash_port}", f"http://127.0.0.1:{idp_port}"
    env = {
        **os.environ,
        "SILICONBENCH_DATABASE_URL": sqlite_url,
        "SILICONBENCH_MODELS_DIR": str(models_dir),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        **OIDC,
        "SILICONBENCH_OIDC_METADATA_URL": f"{issuer}/.well-known/openid-configuration",
        "SILICONBENCH_OIDC_REDIRECT_URI": f"{dash}/oauth2callback",
        "OIDC_PROVIDER_CLIENT_SECRET": OIDC["SILICONBENCH_OIDC_CLIENT_SECRET"],
    }
    for k in ("SILICONBENCH_BROKER_URL", "SILICONBENCH_DASHBOARD_READ_ONLY"):
        env.pop(k, None)
    idp = start(
        [
            sys.executable,
            "-m",
            "tests.oidc_provider",
            "--port",
            str(idp_port),
            "--client-id",
            OIDC["SILICONBENCH_OIDC_CLIENT_ID"],
            "--redirect-uri",
            f"{dash}/oauth2callback",
        ],
        env,
        tmp_path / "idp.log",
        env["SILICONBENCH_OIDC_METADATA_URL"],
        "the OpenID provider",
    )
    try:
        app = start(
            [sys.executable, "-m", "siliconbench.cli.main", "dashboard", "--port", str(dash_port)],
            env,
            tmp_path / "dashboard.log",
            f"{dash}/_stcore/health",
            "the dashboard",
        )
        try:
            yield dash, issuer
        finally:
            stop(app)
    finally:
        stop(idp)


@pytest.fixture
def page():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = b.new_page(viewport={"width": 1400, "height": 1250})
        pg.set_default_timeout(WAIT_MS)
        yield pg
        b.close()


def settled(page, base: str, path: str, title: str) -> None:
    """The page's script has run to its end (its heading is drawn, then the app reports not running)."""
    open_page(page, base, path, title)
    page.locator("[data-testid=stApp][data-test-script-state=notRunning]").wait_for()


def write_actions(page, base: str) -> dict[str, int]:
    """How many of each write action the Sweeps and Regressions pages draw, each page run to its end."""
    settled(page, base, "/sweeps", "Sweeps")
    assert "pending-studio" in table_cells(page)  # the queued sweep is listed: the one Cancel would be for
    found = {
        name: page.get_by_role(role, name=name, exact=True).count()
        for role, name in (
            ("textbox", "Prompt lengths"),
            ("button", "Preview"),
            ("tab", "YAML"),
            ("button", "Cancel sweep"),
        )
    }
    settled(page, base, "/regressions", "Regressions")
    assert "regression" in table_cells(page)  # a finding of this host: the one Confirm would be for
    page.get_by_text("Scan the history").click()  # the expander holding the scan button
    found["Scan"] = page.get_by_role("button", name="Scan for change points").count()
    found["Confirm"] = page.get_by_role("button", name="Confirm (A/B/A/B").count()
    return found


def test_writes_appear_only_after_logging_in_through_the_provider(served, page):
    dash, idp = served
    settled(page, dash, "/", "Compare")
    assert any(c.startswith("mlx ") for c in table_cells(page))  # reading needs no login
    page.get_by_role("button", name="Log in").wait_for()
    assert not any(write_actions(page, dash).values())
    page.get_by_text("Log in (in the sidebar) to confirm this finding").wait_for()
    settled(page, dash, "/sweeps", "Sweeps")
    page.get_by_text("Log in (in the sidebar) to submit a sweep").wait_for()

    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="Sign in to the test provider").wait_for()  # the provider's own page
    assert page.url.startswith(f"{idp}/authorize?")
    page.get_by_role("textbox", name="User name").fill("ada")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_text("Logged in as ada@example.test").wait_for()  # back on the dashboard, via /oauth2callback
    assert page.url.startswith(dash)

    found = write_actions(page, dash)
    assert all(n == 1 for n in found.values()), found

    page.get_by_role("button", name="Log out").click()
    page.get_by_role("button", name="Log in").wait_for()
    assert not any(write_actions(page, dash).values())


# ------------------------------------------------------------------------------------------ the refusal


def sb_dashboard(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SILICONBENCH_OIDC_", "SILICONBENCH_DASHBOARD"))}
    return subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", "dashboard", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=60,
    )


def test_cli_refuses_the_network_without_a_login_and_says_what_to_set():
    out = sb_dashboard("--host", "0.0.0.0", "--port", str(free_port()))
    assert out.returncode == 2, out
    for name in (
        "--host",
        "SILICONBENCH_OIDC_METADATA_URL",
        "SILICONBENCH_OIDC_CLIENT_ID",
        "SILICONBENCH_OIDC_CLIENT_SECRET",
        "SILICONBENCH_OIDC_REDIRECT_URI",
        "SILICONBENCH_DASHBOARD_READ_ONLY",
    ):
        assert name in out.stderr, (name, out.stderr)


def test_cli_refuses_a_login_set_up_by_halves():
    out = sb_dashboard("--port", str(free_port()), SILICONBENCH_OIDC_CLIENT_ID="x")
    assert out.returncode == 2 and "missing: SILICONBENCH_OIDC_METADATA_URL" in out.stderr, out
    out = sb_dashboard(
        "--port",
        str(free_port()),
        **OIDC,
        SILICONBENCH_OIDC_METADATA_URL="https://idp/.well-known/x",
        SILICONBENCH_OIDC_REDIRECT_URI="https://dash.example/",
    )
    assert out.returncode == 2 and "SILICONBENCH_OIDC_REDIRECT_URI" in out.stderr and "/oauth2callback" in out.stderr


def test_the_rule():
    login = Settings(
        **{k.removeprefix("SILICONBENCH_").lower(): v for k, v in OIDC.items()},
        oidc_metadata_url="https://idp/.well-known/openid-configuration",
        oidc_redirect_uri="https://dash.example:8501/oauth2callback",
    )
    none, read_only = Settings(), Settings(dashboard_read_only=True)
    assert [writes(h, none) for h in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "", None, "mini.local")] == [
        Writes.OPEN
    ] * 3 + [Writes.READ_ONLY] * 4
    assert writes("127.0.0.1", login) is writes("0.0.0.0", login) is Writes.LOGIN
    assert writes("127.0.0.1", read_only) is writes("0.0.0.0", read_only) is Writes.READ_ONLY
    assert check_serving("0.0.0.0", read_only) is Writes.READ_ONLY and check_serving("::", login) is Writes.LOGIN
    with pytest.raises(UserError) as e:
        check_serving("192.168.1.20", none)
    assert e.value.field == "--host"


# ---------------------------------------------------------------- read-only pages (AppTest binds nothing)


@pytest.mark.parametrize("address, read_only", [("127.0.0.1", "1"), (None, None)], ids=["flag", "every-interface"])
def test_read_only_pages_offer_no_write_action(sqlite_url, models_dir, tmp_path, monkeypatch, address, read_only):
    for k, v in {
        "SILICONBENCH_DATABASE_URL": sqlite_url,
        "SILICONBENCH_MODELS_DIR": str(models_dir),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "SILICONBENCH_DASHBOARD_READ_ONLY": read_only,
    }.items():
        monkeypatch.setenv(k, v) if v else monkeypatch.delenv(k, raising=False)
    monkeypatch.delenv("SILICONBENCH_BROKER_URL", raising=False)
    st.cache_resource.clear()
    before = st.get_option("server.address")
    st.config.set_option("server.address", address)
    try:
        at = AppTest.from_file(
            str(ROOT / "siliconbench" / "dashboard" / "views" / "sweeps.py"), default_timeout=60
        ).run()
    finally:
        st.config.set_option("server.address", before)
    assert not at.exception, at.exception
    assert not at.button and not at.text_input and "read-only" in " ".join(c.value for c in at.caption)
