"""What a confirmation of a finding is, wherever it runs: its sweep, and the comparison it ends in.

A confirmation reruns the finding's series only, baseline and candidate interleaved A/B/A/B over ``rounds``
fresh processes a side, with the series' own model artifact, lengths, seed, warmup, engine options and thermal
gate (``confirm_spec``). Its verdict is ``compare``'s own test with each process one sample
(``compare_sides``); the finding is *confirmed* when it agrees with the finding's verdict.

Which engine version runs each side is decided by where it runs: on this host (``siliconbench.embedded.confirm``) a label of
this interpreter or of a local engine environment; through the fleet (``siliconbench.coordinator.confirm.on_fleet``) the
package version itself (``side_version``), which each worker resolves with its own environments.
"""

from __future__ import annotations

from siliconbench.contract.engines import ENGINE_PACKAGE
from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import JobSpec
from siliconbench.contract.spec import COMPARE_PROCESSES, SweepSpec, parse_sweep

from siliconbench.coordinator.history.compare import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT, process_samples
from siliconbench.coordinator.history.points import Point
from siliconbench.coordinator.stats.significance import Comparison, compare_processes, min_p_value

DEFAULT_ROUNDS = COMPARE_PROCESSES
# The job fields that are not the measurement's identity: where, under which version, which round, how long.
NOT_IDENTITY = ("host", "engine_version", "process", "repetitions")


def check_rounds(rounds: int) -> None:
    if min_p_value(rounds, rounds) >= DEFAULT_ALPHA:
        raise UserError(
            "--rounds",
            f"{rounds} rounds give {rounds} processes a side, too few for any p-value to reach "
            f"{DEFAULT_ALPHA}; use at least 4 ({COMPARE_PROCESSES} resolves a 5% change).",
        )


def check_confirmable(finding, before: JobSpec) -> None:
    if before.workload != "generate":
        raise UserError("FINDING", f"confirming a {before.workload} series is not supported; only generate.")


def side_version(engine: str, components: dict[str, str]) -> str:
    """The engine package version a side of the finding ran (what a worker's environments are found by)."""
    package = ENGINE_PACKAGE[engine]
    if not components.get(package):
        raise UserError("FINDING", f"the side records no {package} version (an import?), so it cannot be rerun.")
    return components[package]


def same_sides(finding, base: str, cand: str) -> None:
    if base == cand:
        raise UserError(
            "FINDING",
            f"baseline and candidate run the same engine version {base} here; what changed "
            f"({', '.join(finding.changes) or 'nothing recorded'}) cannot be run side by side.",
        )


def confirm_spec(
    finding,
    before: JobSpec,
    *,
    rounds: int,
    repetitions: int | None,
    base: str,
    cand: str,
    hosts: list[str] | None = None,
) -> SweepSpec:
    """The confirmation sweep: the series' configuration, both versions, ``rounds`` processes; pinned to
    ``hosts`` (each host runs every job) when given, the fleet's way."""
    opts = dict(before.engine_options or {})
    threads = opts.pop("threads", None)
    data = {
        "name": f"confirm-{finding.id}",
        "description": f"confirm finding {finding.id}: {finding.series}",
        "models": [before.model],
        "engines": [finding.engine],
        "quantizations": [before.quant],
        "workloads": [
            {
                "kind": "generate",
                "prompt_tokens": [before.n_prompt],
                "gen_tokens": [before.n_gen],
                "depth": [before.n_depth],
            }
        ],
        "repetitions": repetitions or before.repetitions,
        "warmup": before.warmup,
        "seed": before.seed,
        "delay_s": before.delay_s,
        "timeout_s": before.timeout_s,
        "thermal": before.thermal,
        "thermal_timeout_s": before.thermal_timeout_s,
        "processes": rounds,
        "engine_options": {"threads": threads, finding.engine: opts},
        "engine_versions": {finding.engine: [base, cand]},
    }
    if hosts is not None:
        data |= {"hosts": list(hosts), "placement": "each"}
    return parse_sweep(data, source=f"finding {finding.id}'s series")


def identity_differences(before: JobSpec, job: JobSpec) -> list[str]:
    """The fields in which ``job`` would measure something other than the finding's series."""
    a, b = before.key(), job.key()
    return sorted(k for k in set(a) | set(b) if k not in NOT_IDENTITY and a.get(k) != b.get(k))


def compare_sides(
    points: list[Point],
    base: str,
    cand: str,
    metric: str,
    *,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
) -> Comparison:
    """Baseline against candidate over a confirmation's points, each process one sample."""
    a = process_samples([p for p in points if p.engine_version == base], metric)
    b = process_samples([p for p in points if p.engine_version == cand], metric)
    return compare_processes(a, b, metric, alpha=alpha, min_effect=min_effect)


def side_result(
    comp: Comparison, *, base: str, cand: str, rounds: int, n_jobs: int, n_ok: int, n_clean: int, sweep_id: str
) -> dict:
    """What a confirmation attaches to its finding (per host, through the fleet). Of its ``n_jobs``, those that did
    not end ok failed; those that ended ok but disturbed (throttled or contended: left out of the comparison, as
    every verdict leaves them) are counted apart, so a busy machine is not read as a broken job."""
    return {
        **comp.as_dict(),
        "baseline": base,
        "candidate": cand,
        "rounds": rounds,
        "failed_jobs": n_jobs - n_ok,
        "disturbed_jobs": n_ok - n_clean,
        "sweep_id": sweep_id,
    }


def confirm_status(rerun: str, found: str) -> str:
    """A finding's status after one rerun: the same change again confirms it; an equivalent rerun or the opposite
    change refutes it; an inconclusive one leaves it *inconclusive*, never "not reproduced"."""
    if rerun == found:
        return "confirmed"
    return "inconclusive" if rerun == "inconclusive" else "not_confirmed"


def fleet_confirm_status(reruns: list[str], found: str) -> str:
    """Over the hosts of a fleet confirmation: confirmed where every host agrees, not_confirmed where any host
    refutes it, inconclusive otherwise (some host could not tell, none refuted)."""
    each = [confirm_status(v, found) for v in reruns]
    if each and all(x == "confirmed" for x in each):
        return "confirmed"
    if not each or "not_confirmed" in each:
        return "not_confirmed"
    return "inconclusive"
