"""What `siliconbench dashboard` serves: app.py as a Streamlit st.App, with the login's secrets from the environment.

Streamlit otherwise reads st.login's [auth] section from a secrets.toml file; st.App takes it as a mapping,
so SILICONBENCH_OIDC_* never has to be written to disk. `streamlit run siliconbench/dashboard/serve.py` finds ``app``.
"""

from __future__ import annotations

from streamlit.starlette import App

from siliconbench.contract.dashboard_access import streamlit_secrets
from siliconbench.contract.settings import load_settings

app = App("app.py", secrets=streamlit_secrets(load_settings()))  # relative to this file under `streamlit run`
