"""The Fleet page shows suspect hosts (stored by siliconbench.coordinator.fleet.peers) beside the hosts table."""

from __future__ import annotations

from siliconbench.coordinator.fleet.peers import save_suspects
from siliconbench.coordinator.fleet.suspects import suspect_hosts
from siliconbench.storage import database as db
from tests.dashboard.support import app
from tests.peer_seed import SKUS, history


def test_fleet_page_shows_suspect_hosts(seeded):
    rows = suspect_hosts(history(0, slow={"a3": 0.08}, series=1), SKUS, "decode_tps")
    for r in rows:
        r.host, r.peers, r.job_ids = "mbp", ["mbp-2", "mbp-3", "mbp-4"], ["j1", "j2"]
    with db.session_scope(seeded["url"]) as s:
        save_suspects(s, rows)
    at = app("fleet")
    hosts = next(d.value for d in at.dataframe if "worker" in d.value.columns).set_index("worker")
    assert hosts.loc["mbp", "suspect"] == "⚠ suspect" and hosts.loc["studio", "suspect"] == ""
    sus = next(d.value for d in at.dataframe if "suspect host" in d.value.columns)
    assert list(sus["suspect host"]) == ["mbp"] and sus["ratio vs peers"][0] < 0.95
    assert sus["peers"][0] == "mbp-2, mbp-3, mbp-4" and sus["results marked"][0] == 2
    assert sus["since"][0].endswith("s ago") and "–" in sus["95% CI"][0]
