"""Who may do what in the dashboard, without Streamlit: the CLI checks it before serving, the pages apply it.

Reading results is open to whoever reaches the dashboard. Writing (submitting or cancelling a sweep,
scanning for regressions, confirming one) is open only on a loopback-bound dashboard without a login
configured; once SILICONBENCH_OIDC_* is set it needs a user logged in through that OpenID provider;
SILICONBENCH_DASHBOARD_READ_ONLY turns writing off for everyone. A dashboard bound beyond loopback with
neither is refused by `siliconbench dashboard`, and, started some other way, offers no write action.
"""

from __future__ import annotations

import ipaddress
import secrets
from enum import StrEnum

from .errors import UserError
from .settings import Settings

# Settings field -> its variable; the four a login needs (the cookie secret may be left to chance).
REQUIRED = {
    "oidc_metadata_url": "SILICONBENCH_OIDC_METADATA_URL",
    "oidc_client_id": "SILICONBENCH_OIDC_CLIENT_ID",
    "oidc_client_secret": "SILICONBENCH_OIDC_CLIENT_SECRET",
    "oidc_redirect_uri": "SILICONBENCH_OIDC_REDIRECT_URI",
}
CALLBACK_PATH = "/oauth2callback"  # Streamlit's route; it ignores a redirect URI that ends otherwise


class Writes(StrEnum):
    OPEN = "open"  # loopback, no login configured: whoever runs it is the machine's user
    LOGIN = "login"  # a user logged in through the OpenID provider
    READ_ONLY = "read_only"  # nobody


def is_loopback(host: str | None) -> bool:
    """127.0.0.0/8, ::1 or localhost; an empty address binds every interface, so it is not."""
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def missing_login_settings(s: Settings) -> list[str]:
    return [var for field, var in REQUIRED.items() if not getattr(s, field)]


def login_configured(s: Settings) -> bool:
    """All of SILICONBENCH_OIDC_* set; a half-configured login is an error (check_serving), never 'off'."""
    return not missing_login_settings(s)


def writes(host: str | None, s: Settings) -> Writes:
    if s.dashboard_read_only:
        return Writes.READ_ONLY
    if login_configured(s):
        return Writes.LOGIN
    return Writes.OPEN if is_loopback(host) else Writes.READ_ONLY


def check_serving(host: str, s: Settings) -> Writes:
    """Refuse what would expose write actions without a login, or a login set up by halves."""
    missing = missing_login_settings(s)
    if missing and len(missing) < len(REQUIRED):
        raise UserError(
            missing[0], f"a dashboard login needs all of {', '.join(REQUIRED.values())}; missing: {', '.join(missing)}."
        )
    if s.oidc_redirect_uri and not s.oidc_redirect_uri.rstrip("/").endswith(CALLBACK_PATH):
        raise UserError(
            "SILICONBENCH_OIDC_REDIRECT_URI",
            f"must be the dashboard's URL followed by {CALLBACK_PATH} (got {s.oidc_redirect_uri!r}).",
        )
    w = writes(host, s)
    if w is Writes.READ_ONLY and not s.dashboard_read_only:  # beyond loopback, nobody to ask for a login
        raise UserError(
            "--host",
            f"{host} exposes the dashboard beyond this machine, and its write actions (submit, "
            "cancel, scan, confirm) need a logged-in user there: set "
            f"{', '.join(REQUIRED.values())} (an OpenID Connect provider), or set "
            "SILICONBENCH_DASHBOARD_READ_ONLY=1 to serve results read-only.",
        )
    return w


def streamlit_secrets(s: Settings) -> dict | None:
    """The [auth] section Streamlit's st.login reads, from the environment; None when no login is configured."""
    if not login_configured(s):
        return None
    cookie = s.oidc_cookie_secret.get_secret_value() if s.oidc_cookie_secret else secrets.token_urlsafe(32)
    return {
        "auth": {
            "redirect_uri": s.oidc_redirect_uri.rstrip("/"),
            "cookie_secret": cookie,
            "client_id": s.oidc_client_id,
            "client_secret": s.oidc_client_secret.get_secret_value(),
            "server_metadata_url": s.oidc_metadata_url,
        }
    }
