"""The Sweeps page's logic without widgets: form values -> sweep data -> preview -> submit.

Every error is a ``UserError`` naming a field of the sweep; ``form_field`` maps that dotted path onto
the form field it is shown under, so the message sits next to what has to change.
"""

from __future__ import annotations

import socket
import time

import yaml

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import QUANT_LEVELS, ModelCatalog
from siliconbench.contract.settings import Settings
from siliconbench.contract.spec import SweepSpec, parse_sweep

from siliconbench.coordinator.fleet import sweeps as fleet
from siliconbench.coordinator.reads import queries
from siliconbench.dashboard import runner
from siliconbench.embedded import run as embedded
from siliconbench.storage.database import session_scope
from siliconbench.worker.engines import installed_engines  # package metadata only: imports no engine

FIELDS = (
    "name",
    "models",
    "engines",
    "quantizations",
    "prompt_tokens",
    "gen_tokens",
    "depth",
    "repetitions",
    "processes",
    "warmup",
    "hosts",
    "placement",
    "on_interrupt",
)
LENGTHS = ("prompt_tokens", "gen_tokens", "depth")


def form_field(error_field: str) -> str:
    """'workloads[0].prompt_tokens[1]' -> 'prompt_tokens'; anything not on the form -> 'general'."""
    head = error_field.split(".")[0].split("[")[0]
    if head == "workloads":
        return next((f for f in LENGTHS if f in error_field), "prompt_tokens")  # the lengths as a whole
    return head if head in FIELDS else "general"


def lengths(text: str, name: str) -> list[int]:
    field = f"workloads[0].{name}"
    items = [x.strip() for x in str(text).replace(";", ",").split(",") if x.strip()]
    if not items:
        raise UserError(field, "give at least one length (comma-separated token counts).")
    try:
        return [int(x) for x in items]
    except ValueError:
        bad = next(x for x in items if not x.lstrip("-").isdigit())
        raise UserError(field, f"{bad!r} is not a whole number of tokens.") from None


def data_from_form(v: dict) -> dict:
    """Sweep data (as a YAML file would hold it) from the form's values."""
    data = {
        "name": str(v["name"]).strip(),
        "models": list(v["models"]),
        "engines": list(v["engines"]),
        "quantizations": list(v["quantizations"]),
        "workloads": [{"kind": "generate", **{n: lengths(v[n], n) for n in LENGTHS}}],
        "repetitions": int(v["repetitions"]),
        "warmup": int(v["warmup"]),
    }
    if v.get("processes"):
        data["processes"] = int(v["processes"])
    if v.get("hosts"):
        data["hosts"] = list(v["hosts"])
    if v.get("placement"):
        data["placement"] = v["placement"]
    if v.get("on_interrupt"):
        data["on_interrupt"] = v["on_interrupt"]
    return data


def spec_from_yaml(text: str) -> SweepSpec:
    try:
        data = yaml.safe_load(text or "")
    except yaml.YAMLError as exc:
        raise UserError("yaml", f"is not valid YAML: {exc}") from None
    return parse_sweep(data)


def choices(s: Settings, hosts: list[dict]) -> tuple[list[str], list[str]]:
    """Models and quantizations to offer: the local models folder, or what the fleet's workers registered."""
    if s.broker_url:
        models = sorted({m for h in hosts for m in h["models"]})
        return models, list(QUANT_LEVELS)
    cat = ModelCatalog(s.resolved_models_dir)
    quants = {q for m in cat.models.values() for q in m.quant_names()} - set(QUANT_LEVELS)
    return cat.names(), list(QUANT_LEVELS) + sorted(quants)


def preview(spec: SweepSpec, s: Settings, url: str) -> dict:
    """What submitting would do: the jobs, where each goes, what fits nowhere and why, how long it takes."""
    if s.broker_url:
        with session_scope(url) as session:
            p = fleet.preview(session, spec)
            estimate = queries.estimate_duration(session, p["jobs"])
        return {"mode": "fleet", "spec": spec, **p, "estimate": estimate}

    jobs = embedded.plan(spec, s.resolved_models_dir, sweep_id=f"{spec.name}-{time.strftime('%Y%m%dT%H%M%S')}")
    have = installed_engines()
    unplaceable = [
        {"job": j.label(), "reasons": [f"this machine has no {j.engine} installed"]}
        for j in jobs
        if j.engine not in have
    ]
    with session_scope(url) as session:
        estimate = queries.estimate_duration(session, jobs)
    return {
        "mode": "embedded",
        "spec": spec,
        "jobs": jobs,
        "unplaceable": unplaceable,
        "estimate": estimate,
        "assignments": {f"this machine ({socket.gethostname()})": len(jobs) - len(unplaceable)},
    }


def submit(p: dict, s: Settings, url: str) -> str:
    """Enqueue (fleet) or start in the background (embedded) the previewed sweep; returns its id."""
    if p["unplaceable"]:
        raise UserError("hosts", f"{len(p['unplaceable'])} job(s) fit nowhere; change the sweep and preview again.")
    if p["mode"] == "fleet":
        return fleet.submit(p["spec"], database_url=url, broker_url=s.broker_url)
    run = runner.start(p["spec"], p["jobs"], database_url=url, models_dir=s.resolved_models_dir)
    return run.sweep_id


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
