"""siliconbench dashboard: `siliconbench dashboard` (or `streamlit run siliconbench/dashboard/app.py`).

Pages over the coordinator's database: Compare, Quantizations, Serving, Sweeps, Fleet, Result detail, Regressions. They live in
``views/``, not ``pages/``: a ``pages/`` folder beside this script makes Streamlit run a deep link such
as /result?job=... in its legacy multipage mode, without this script and its st.navigation.
"""

from __future__ import annotations

import streamlit as st

from siliconbench.dashboard import access

st.set_page_config(page_title="siliconbench", layout="wide")

pages = [  # paths relative to this script, as Streamlit resolves them
    st.Page("views/compare.py", title="Compare", url_path="compare", default=True),
    st.Page("views/quantizations.py", title="Quantizations", url_path="quantizations"),
    st.Page("views/serving.py", title="Serving", url_path="serving"),
    st.Page("views/sweeps.py", title="Sweeps", url_path="sweeps"),
    st.Page("views/fleet.py", title="Fleet", url_path="fleet"),
    st.Page("views/result.py", title="Result detail", url_path="result"),
    st.Page("views/regressions.py", title="Regressions", url_path="regressions"),
]
nav = st.navigation(pages)
access.sidebar()  # under the page links: log in or out, where writing needs a login
nav.run()
