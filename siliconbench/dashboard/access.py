"""May this browser session write? The rule of siliconbench.contract.dashboard_access applied to Streamlit's st.user.

Every page that offers a write action (Sweeps: submit, cancel; Regressions: scan, confirm) draws it only
when ``may_write()``, and calls ``explain`` in its place otherwise. A widget that is not drawn has no
callback Streamlit would run, so hiding is also refusing.
"""

from __future__ import annotations

import streamlit as st

from siliconbench.contract.dashboard_access import Writes, writes

from siliconbench.dashboard import data


def bound_to() -> str:
    return st.get_option("server.address") or ""


def policy() -> Writes:
    return writes(bound_to(), data.settings())


def may_write() -> bool:
    w = policy()
    return w is Writes.OPEN or (w is Writes.LOGIN and bool(st.user.is_logged_in))


def user_name() -> str:
    return str(st.user.get("email") or st.user.get("name") or st.user.get("sub") or "?")


def explain(action: str) -> None:
    """Say, where a write action would be, why it is not here and what would bring it."""
    w = policy()
    if w is Writes.LOGIN:
        st.info(f"Log in (in the sidebar) to {action}.")
    elif data.settings().dashboard_read_only:
        st.caption(f"This dashboard is read-only (SILICONBENCH_DASHBOARD_READ_ONLY); {action} with the CLI.")
    else:
        st.caption(
            f"This dashboard is read-only: it is bound to {bound_to() or 'every interface'} without a login "
            f"(SILICONBENCH_OIDC_*); {action} with the CLI."
        )


def sidebar() -> None:
    """The login control, where writing needs a login."""
    if policy() is not Writes.LOGIN:
        return
    with st.sidebar:
        if st.user.is_logged_in:
            st.caption(f"Logged in as {user_name()}")
            st.button("Log out", on_click=st.logout, key="auth_logout")
        else:
            st.caption("Reading is open; submitting, cancelling and confirming need a login.")
            st.button("Log in", on_click=st.login, key="auth_login", type="primary")
