"""The Streamlit dashboard: pages under AppTest, login through a real OpenID provider, a real browser."""
