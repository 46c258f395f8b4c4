"""What the pages share: settings, the migrated database, and cached reads through siliconbench.coordinator.reads.queries.

Each cached read takes the database's ``data_version`` (result count, newest result time) as part of
its key, so clicking through filters re-runs no query, yet a newly stored result shows on the next run.
"""

from __future__ import annotations

from contextlib import contextmanager

import streamlit as st

from siliconbench.contract.errors import UserError
from siliconbench.contract.settings import Settings, load_settings

from siliconbench.coordinator.fleet import peers, roster as fleet_roster, sweeps as fleet
from siliconbench.coordinator.reads import queries
from siliconbench.coordinator.reports import export
from siliconbench.coordinator.watch import watches as watch_store  # watches and their campaigns (Regressions page)
from siliconbench.dashboard import runner
from siliconbench.storage import sweep_store
from siliconbench.storage.database import ready, session_scope

CACHE_TTL_S = 60  # bounds memory; freshness comes from data_version


def settings() -> Settings:
    return load_settings()


@st.cache_resource(show_spinner=False)
def _migrated(url: str) -> str:
    ready(url)  # as the CLI: SQLite (the embedded database) migrates itself, PostgreSQL must be current
    runner.recover(url, settings().resolved_models_dir)  # sweeps a stopped dashboard left half-done
    return url


def database_url() -> str:
    return _migrated(settings().resolved_database_url)


@contextmanager
def user_errors():
    """Show a UserError as one paragraph naming the field, instead of a traceback."""
    try:
        yield
    except UserError as exc:
        choices = f" Valid choices: {', '.join(exc.choices)}." if exc.choices else ""
        st.error(f"**{exc.field}**: {exc.message}{choices}")
        st.stop()


def version(url: str) -> tuple:
    with session_scope(url) as s:
        return queries.data_version(s)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def filter_options(url: str, version: tuple) -> dict:
    with session_scope(url) as s:
        return queries.filter_options(s)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False, max_entries=64)
def series(url: str, version: tuple, filters: queries.Filters) -> tuple[list[dict], int]:
    with session_scope(url) as s:
        return queries.series(s, filters)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False, max_entries=64)
def raw_samples(url: str, version: tuple, filters: queries.Filters, metric: str, identities: tuple) -> list[dict]:
    with session_scope(url) as s:
        return queries.raw_samples(s, filters, metric, identities=list(identities))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False, max_entries=64)
def disturbed_results(url: str, version: tuple, filters: queries.Filters) -> dict[str, int]:
    with session_scope(url) as s:
        return queries.disturbed_results(s, filters)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False, max_entries=64)
def failed_results(url: str, version: tuple, filters: queries.Filters) -> list[dict]:
    with session_scope(url) as s:
        return queries.failed_results(s, filters)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def recent_results(url: str, version: tuple, failed_only: bool) -> list[dict]:
    with session_scope(url) as s:
        return queries.recent_results(s, failed_only=failed_only)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False, max_entries=32)
def result_detail(url: str, version: tuple, job_id: str) -> dict | None:
    with session_scope(url) as s:
        return queries.result_detail(s, job_id)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def sweep_records(url: str, version: tuple, sweep_id: str) -> list[dict]:
    """Export records of one sweep (the quantization matrix joins its perplexity and generate jobs)."""
    with session_scope(url) as s:
        return export.load_records(s, sweep_id=sweep_id)


def picked_sweep_records(key: str) -> list[dict]:
    """A sweep picker (newest first) and the picked sweep's export records; stops the page when there is none."""
    with user_errors():
        url = database_url()
        ids = [s["id"] for s in sweeps(url)]
    if not ids:
        st.info("No sweeps yet.")
        st.stop()
    return sweep_records(url, version(url), st.selectbox("Sweep", ids, key=key))


SWEEPS_SHOWN = 200  # the Sweeps page lists the newest (and every live one), not all of history


def sweeps(url: str) -> list[dict]:
    """Not cached: progress must be live."""
    with session_scope(url) as s:
        return sweep_store.list_sweeps(s, limit=SWEEPS_SHOWN)


def active_sweeps(url: str) -> list[str]:
    with session_scope(url) as s:
        return queries.active_sweeps(s)


def hosts(url: str) -> list[dict]:
    """Not cached: online/offline comes from heartbeats seconds old."""
    with session_scope(url) as s:
        return [{**h, "sku": peers.sku_of(h)} for h in fleet.list_hosts(s)]


def roster(url: str, *, state: str | None, sku: str | None, page: int, per_page: int) -> fleet_roster.Roster:
    """Hosts by SKU and state, and one page of them (siliconbench.coordinator.fleet.roster); not cached, as hosts()."""
    with session_scope(url) as s:
        return fleet_roster.roster(s, state=state, sku=sku, page=page, per_page=per_page)


def suspects(url: str) -> list[dict]:
    """Active suspect hosts (siliconbench.coordinator.fleet.peers), newest first; not cached: a campaign may flag one any time."""
    with session_scope(url) as s:
        return peers.list_suspects(s)


def watch_campaigns(url: str) -> tuple[list[dict], list[dict]]:
    """Watches and their campaigns, newest first (siliconbench.coordinator.watch.watches); not cached: a check or a campaign's step
    changes them without any new result."""
    with session_scope(url) as s:
        return watch_store.list_watches(s), watch_store.campaigns(s)
