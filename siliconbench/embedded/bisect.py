"""Bisect a performance regression to the llama.cpp commit that caused it, on this machine.

``siliconbench regressions bisect --source DIR --good REF --bad REF SWEEP.yaml`` (or ``--finding ID``; ``--resume
ID`` goes on with an interrupted one). The sweep picks what is measured: one model, one quantization, one generate
configuration on llama.cpp; ``--metric`` which figure.

The search is the fleet's (``siliconbench.coordinator.bisection``): one state machine decides every step — the ends, each
midpoint between the last good and the first bad, the confirmation that re-measures the pair it names — and one
store keeps it (the ``bisections`` table, runner ``local``). This module is its driver here: it builds each commit
the search asks for (``siliconbench.worker.builds``, once per commit; a build ``env add`` made is reused), runs each look as a
stored sweep of fresh processes (the sides rotated round by round, through each build's own llama-bench), reads
the processes back from the store and hands them to the search. A commit that does not build is skipped and named.

How it ends, with its exit status: *found* (0) the first bad commit, confirmed; *ambiguous* (4) every commit it
may be; *equivalent* (5) or *improvement* (6) between the ends; *inconclusive* (3) with what would resolve it;
*failed* (1). Each step's sweeps are stored as any sweep is, so ``compare`` and the dashboard see them too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.spec import SweepSpec

from siliconbench.coordinator.bisection import record
from siliconbench.coordinator.bisection.sweeps import ENGINE, MEASURED, THROUGH
from siliconbench.coordinator.fleet.sweeps import cancel
from siliconbench.coordinator.stats.significance import DEFAULT_MIN_EFFECT
from siliconbench.storage import sweep_store
from siliconbench.storage.database import session_scope
from siliconbench.storage.watch_tables import Bisection
from siliconbench.worker.builds.source import Revision, between, resolve
from siliconbench.worker.envs.builds import add_build
from siliconbench.worker.envs.venvs import interpreters
from siliconbench.worker.platform.host_facts import host_facts

from .run import owner_tag, plan, run_jobs

BISECT_TOOLS = ("llama-bench",)  # a bisection needs only the yardstick of each build
Say = Callable[[str], None]


def check_spec(spec: SweepSpec, metric: str) -> None:
    """One measurement on llama.cpp: the fields that would make it several, each refused by name."""
    if ENGINE not in spec.engines:
        raise UserError("engines", f"a bisection measures llama.cpp builds; the sweep names {', '.join(spec.engines)}.")
    if len(spec.models) != 1:
        raise UserError("models", f"name one model to bisect on, not {len(spec.models)}.")
    if len(spec.quantizations) != 1:
        raise UserError("quantizations", f"name one quantization to bisect on, not {len(spec.quantizations)}.")
    if len(spec.workloads) != 1 or spec.workloads[0].kind != "generate":
        raise UserError("workloads", "a bisection measures one generate workload (what a build's llama-bench runs).")
    w = spec.workloads[0]
    if len(w.prompt_tokens) * len(w.gen_tokens) * len(w.depth) != 1:
        raise UserError("workloads[0]", "give one prompt_tokens, one gen_tokens and one depth: one configuration.")
    if metric not in MEASURED:
        raise UserError("--metric", f"{metric!r} is not what a build's llama-bench measures.", list(MEASURED))
    if metric == "prefill_tps" and w.prompt_tokens[0] == 0 or metric == "decode_tps" and w.gen_tokens[0] == 0:
        raise UserError("--metric", f"{metric} needs a non-zero length in the sweep's workload.")


def check_min_effect(min_effect: float) -> None:
    if not 0 < min_effect < 0.5:
        raise UserError(
            "--min-effect", f"{min_effect!r}: give the smallest change that counts, in (0, 0.5): 0.03 = 3%."
        )


def start(
    source_dir: str | Path,
    good: str,
    bad: str,
    spec: SweepSpec,
    *,
    metric: str,
    database_url: str,
    models_dir: Path,
    min_effect: float = DEFAULT_MIN_EFFECT,
    tools: tuple[str, ...] = BISECT_TOOLS,
    cmake_flags: list[str] | None = None,
    finding_id: int | None = None,
    finding_through: str = "",
) -> int:
    """Check everything, then record a new bisection (nothing is built yet); its id."""
    check_min_effect(min_effect)
    check_spec(spec, metric)
    ModelCatalog(models_dir).get(spec.models[0], field="models[0]")
    if "llama-bench" not in tools:
        raise UserError("--tools", "a bisection measures every commit through its llama-bench: keep llama-bench.")
    commits = between(source_dir, good, bad)  # refs checked before anything is built
    g = resolve(source_dir, good, "--good")
    with session_scope(database_url) as s:
        b = record.begin(
            s,
            source=str(Path(source_dir).resolve()),
            good=g.as_dict() | {"label": g.label},
            bad=commits[-1].as_dict() | {"label": commits[-1].label},
            commits=[c.as_dict() | {"label": c.label} for c in commits],
            metric=metric,
            min_effect=min_effect,
            suite=spec.model_dump(mode="json", by_alias=True),
            host=host_facts()["hostname"],
            runner=record.LOCAL,
            finding_id=finding_id,
            options={"tools": list(tools), "cmake_flags": list(cmake_flags or []), "through": THROUGH},
            finding_through=finding_through,
        )
        return b.id


def resumable(database_url: str, bisection_id: int) -> None:
    """A ``--resume`` id: this machine's, and not finished."""
    with session_scope(database_url) as s:
        b = s.get(Bisection, bisection_id)
        if b is None:
            raise UserError("--resume", f"no bisection {bisection_id} here (`siliconbench regressions bisections`).")
        if b.runner != record.LOCAL:
            raise UserError(
                "--resume", f"bisection {bisection_id} runs on the fleet ({b.host}); its scheduler steps it."
            )
        if b.status in ("done", "failed"):
            raise UserError(
                "--resume", f"bisection {bisection_id} has ended ({b.outcome or b.status}): nothing to resume."
            )


def drive(database_url: str, models_dir: Path, bisection_id: int, say: Say | None = None) -> dict:
    """Run the search to its end: build what it asks for, measure each look, hand the processes over. Resumes
    from whatever the store holds (an interrupted look's finished processes count; its other jobs are cancelled)."""
    say = say or (lambda _m: None)
    with session_scope(database_url) as s:
        b = s.get(Bisection, bisection_id)
        for sid in (b.current or {}).get("sweeps") or []:
            cancel(s, sid)  # a look a stopped run left half-done: its finished processes are read, the rest dropped
            sweep_store.refresh_sweep_status(s, sid)
        src, opts = b.source, dict(b.options or {})
        say(f"bisection {b.id}: {len(b.commits)} commits after {b.good['label']} up to {b.bad['label']} on {b.metric}")
    while True:
        with session_scope(database_url) as s:
            b = s.get(Bisection, bisection_id)
            search = record.search_of(b)
            w = search.want()
            if w is None:
                return record.bisection_dict(b)
            todo = record.unbuilt(b, w)
            commit = record.commit_of(b, todo[0]) if todo else None
        if todo:
            _build(database_url, bisection_id, todo[0], commit, src, opts, say)
            continue
        with session_scope(database_url) as s:
            b = s.get(Bisection, bisection_id)
            have = record.samples(s, b, w, record.step_of(b, w))
        measured = min(len(v) for v in have.values()) < w.processes
        if measured:
            _measure(database_url, models_dir, bisection_id, w, have, say)
        with session_scope(database_url) as s:  # the search's rules take it from here, a short side included
            b = s.get(Bisection, bisection_id)
            search = record.search_of(b)
            before = len(search.steps)
            search.observe(record.samples(s, b, w, record.step_of(b, w)) if measured else have)
            record.keep(b, search)
            if len(search.steps) > before:
                say(_step_line(b, search.steps[-1]))
            if search.done:
                say(f"{search.outcome}: {search.reason}")


def _build(database_url: str, bisection_id: int, index: int, commit: dict, src: str, opts: dict, say: Say) -> None:
    rev = Revision(**{k: v for k, v in commit.items() if k in Revision.__dataclass_fields__})
    say(f"building {rev.label} ({rev.subject})")
    try:
        env = add_build(
            src,
            rev.sha,
            tools=tuple(opts.get("tools") or BISECT_TOOLS),
            cmake_flags=opts.get("cmake_flags"),
            progress=say,
        )
        label, err = env.version, None
    except UserError as exc:
        label, err = None, exc.message[:300]
    with session_scope(database_url) as s:
        b = s.get(Bisection, bisection_id)
        if label is not None:
            b.labels = {**(b.labels or {}), str(index): label}
            b.status = "measuring"
        else:
            search = record.search_of(b)
            search.skip(index, f"did not build: {err}")
            record.keep(b, search)
            say(f"{rev.label} skipped: did not build")


def _measure(database_url: str, models_dir: Path, bisection_id: int, w, have: dict, say: Say) -> None:
    with session_scope(database_url) as s:
        b = s.get(Bisection, bisection_id)
        sid, spec = record.look_sweep(b, w, have)
        labels = [record.label(b, i) for i in w.sides]
    jobs = plan(spec, models_dir, sweep_id=sid)
    pythons = interpreters(jobs)
    with session_scope(database_url) as s:
        sweep_store.create_sweep(s, sid, spec, jobs)
        sweep_store.set_owner(s, sid, owner_tag())
        record.record_sweep(s.get(Bisection, bisection_id), w, sid)
    say(f"  step {w.step} ({w.kind}), look {w.look}: {' · '.join(labels)}, {spec.processes} process(es) a side")
    run_jobs(sid, jobs, pythons, database_url=database_url, models_dir=models_dir)


def _step_line(b: Bisection, step: dict) -> str:
    commit = record.commit_of(b, step["index"])
    g = step.get("against_good") or {}
    ratio = f" {g['ratio']:.3f}" if g.get("ratio") else ""
    return f"step: {commit.get('label')} ({commit.get('subject', '')[:50]}) {step['kind']}: {step['verdict']}{ratio}"


__all__ = ["check_min_effect", "check_spec", "drive", "resumable", "start"]
