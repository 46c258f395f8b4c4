"""Bisect a performance regression to the llama.cpp commit that caused it, with a statistical verdict at each step.

``siliconbench regressions bisect --source DIR --good REF --bad REF SWEEP.yaml``. The sweep picks what is
measured: one model, one quantization, one generate configuration on llama.cpp; ``--metric`` which figure.

1. **The ends.** ``good`` and ``bad`` are built (``worker.builds``, once per commit, incrementally) and measured
   interleaved, a fresh process per side per round, and decided by the watch's confirm statistics: each process
   one sample, Mann-Whitney U with the Hodges-Lehmann ratio and its Moses interval, group-sequential looks at
   5, 8, 11 and 15 processes a side (``coordinator.stats.sequential``), the minimum effect. No regression between
   the ends ends the search (exit 1) with the interval that says so.
2. **Each step** builds the midpoint of the commits still in question (first-parent line) and measures it
   between both current ends, the three rotated round by round (A B C, B C A, C A B), so drift hits all alike,
   and decides it by the rules in ``coordinator.stats.bisection`` (the fleet's bisections use the same): *bad*,
   *good*, or the next look; a step still undecided at the last look stops the search and says so (exit 3),
   with its evidence: it never guesses. A commit that does not build or whose jobs fail is skipped, as
   ``git bisect skip`` does, and named.
3. **The answer**: the first bad commit (full sha, subject, build number), the effect (last good → first bad,
   with its interval) and every step's evidence, also written as JSON (``<data dir>/bisections/``).

Every commit is measured through its own llama-bench (``coordinator.history.bisect_sweeps``). Each step is a stored
sweep (results with their commit, as any sweep's), so ``compare`` and the dashboard see them too.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from siliconbench.errors import UserError
from siliconbench.jobs import JobSpec, expand
from siliconbench.manifest import ModelCatalog
from siliconbench.results import JobResult
from siliconbench.spec import SweepSpec

from coordinator.fleet.sweeps import cancel
from coordinator.history.bisect_sweeps import ENGINE, MEASURED, step_spec
from coordinator.stats.bisection import (
    BAD,
    comparison_dict,
    ends_decision,
    midpoint_decisions,
    midpoint_verdict,
    next_midpoint,
)
from coordinator.stats.sequential import LOOKS
from coordinator.stats.significance import DEFAULT_MIN_EFFECT, Verdict
from storage import sweep_store
from storage.database import session_scope
from worker.builds.source import Revision, between, resolve
from worker.envs.builds import add_build
from worker.envs.venvs import interpreters

from .bisect_records import Bisection, Step, record
from .run import owner_tag, run_jobs

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


def rounds(jobs: list[JobSpec]) -> dict[int, list[JobSpec]]:
    """Jobs by round, in the sweep's order (``step_spec`` rotates the sides: A B C, B C A, C A B ...)."""
    out: dict[int, list[JobSpec]] = {}
    for j in jobs:
        out.setdefault(j.process, []).append(j)
    return dict(sorted(out.items()))


class Runner:
    """Measures labels interleaved, look by look, each step its own stored sweep."""

    def __init__(self, spec: SweepSpec, metric: str, database_url: str, models_dir: Path, bisect_id: str, say: Say):
        self.spec, self.metric, self.db, self.models_dir, self.id, self.say = (
            spec,
            metric,
            database_url,
            models_dir,
            bisect_id,
            say,
        )
        self.n = 0

    def measure(self, labels: list[str], classify: Callable[[dict[str, list]], str | None]) -> tuple[str | None, dict]:
        """Run rounds until ``classify`` (given each label's processes) says something at a look, or the last
        look passes. Returns (what it said or None, each label's processes)."""
        self.n += 1
        name = f"bisect-{self.id}-{self.n}"
        spec = step_spec(self.spec, labels, LOOKS[-1], name)
        jobs = expand(spec, ModelCatalog(self.models_dir), sweep_id=name)
        pythons = interpreters(jobs)
        with session_scope(self.db) as s:
            sweep_store.create_sweep(s, name, spec, jobs)
            sweep_store.set_owner(s, name, owner_tag())
        samples: dict[str, list] = {label: [] for label in labels}
        said = None
        for r, ordered in rounds(jobs).items():

            def keep(job: JobSpec, result: JobResult) -> None:
                values = result.measured(self.metric) if result.status.value == "ok" else []
                if values:
                    samples[job.engine_version].append(values)

            run_jobs(name, ordered, pythons, database_url=self.db, models_dir=self.models_dir, on_done=keep)
            done = r + 1
            self.say(f"  round {done}: " + ", ".join(f"{k} {_median(v)}" for k, v in samples.items()))
            if done in LOOKS:
                if min(len(v) for v in samples.values()) < done:
                    break  # a side's jobs failed: the caller skips or stops, never decides on fewer
                said = classify(samples)
                if said is not None:
                    break
        with session_scope(self.db) as s:
            cancel(s, name)  # the rounds a decided step did not need
            sweep_store.refresh_sweep_status(s, name)
        return said, samples | {"_sweep": name}


def _median(processes: list) -> str:
    if not processes:
        return "-"
    last = sorted(processes[-1])
    return f"{last[len(last) // 2]:.1f}"


def bisect(
    source_dir: str | Path,
    good: str,
    bad: str,
    spec: SweepSpec,
    *,
    metric: str = "decode_tps",
    database_url: str,
    models_dir: Path,
    min_effect: float = DEFAULT_MIN_EFFECT,
    tools: tuple[str, ...] = BISECT_TOOLS,
    cmake_flags: list[str] | None = None,
    say: Say | None = None,
    out_dir: Path | None = None,
) -> Bisection:
    """Find the first commit after ``good`` up to ``bad`` where ``metric`` regressed (module docstring)."""
    say = say or (lambda _m: None)
    check_spec(spec, metric)
    ModelCatalog(models_dir).get(spec.models[0], field="models[0]")
    commits = between(source_dir, good, bad)  # refs checked before anything is built
    g, b = resolve(source_dir, good, "--good"), commits[-1]
    rec = Bisection(
        id=f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}",
        source=str(Path(source_dir).resolve()),
        good=g.as_dict() | {"label": g.label},
        bad=b.as_dict() | {"label": b.label},
        metric=metric,
        min_effect=min_effect,
        commits=len(commits),
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    say(f"bisecting {len(commits)} commits after {g.label} up to {b.label} on {metric}")

    def built(rev: Revision) -> tuple[str, dict]:
        env = add_build(source_dir, rev.sha, tools=tools, cmake_flags=cmake_flags, progress=say)
        info = {k: env.build.get(k) for k in ("build_s", "incremental", "changed_files")}
        return env.version, info

    runner = Runner(spec, metric, database_url, models_dir, rec.id, say)
    lo_label, _ = built(g)
    hi_label, hi_build = built(b)

    def ends(s):
        d = ends_decision(s[lo_label], s[hi_label], metric, min_effect=min_effect)
        return d.verdict.value if d.decided else None

    said, s = runner.measure([lo_label, hi_label], ends)
    d = ends_decision(s[lo_label], s[hi_label], metric, min_effect=min_effect)
    rec.steps.append(
        Step(
            "ends",
            rec.bad,
            [lo_label, hi_label],
            said or "undecided",
            d.processes,
            comparison_dict(d),
            None,
            s["_sweep"],
            hi_build,
        )
    )
    if said != Verdict.regression.value:
        rec.outcome = "no regression" if said else "undecided"
        rec.effect = comparison_dict(d)
        return record(rec, out_dir, say)

    lo, hi = -1, len(commits) - 1  # indices into commits; -1 is the good end
    last_effect = comparison_dict(d)
    candidates = list(range(len(commits)))
    while (mid := next_midpoint(candidates, lo, hi)) is not None:
        rev = commits[mid]
        say(f"step: {rev.label} ({rev.subject}) between {lo_label} and {hi_label}")
        try:
            mid_label, mid_build = built(rev)
        except UserError as exc:
            rec.skipped.append(rev.as_dict() | {"reason": exc.message[:300]})
            rec.steps.append(Step("midpoint", rev.as_dict(), [], "skipped", note=exc.message[:300]))
            candidates.remove(mid)
            continue

        def classify(s, mid_label=mid_label):
            return midpoint_verdict(
                *midpoint_decisions(s[lo_label], s[mid_label], s[hi_label], metric, min_effect=min_effect)
            )

        verdict, s = runner.measure([lo_label, mid_label, hi_label], classify)
        if min(len(s[x]) for x in (lo_label, mid_label, hi_label)) == 0:
            rec.skipped.append(rev.as_dict() | {"reason": "its jobs failed"})
            rec.steps.append(Step("midpoint", rev.as_dict(), [], "skipped", sweep_id=s["_sweep"], note="jobs failed"))
            candidates.remove(mid)
            continue
        d1, d2 = midpoint_decisions(s[lo_label], s[mid_label], s[hi_label], metric, min_effect=min_effect)
        rec.steps.append(
            Step(
                "midpoint",
                rev.as_dict() | {"label": rev.label},
                [lo_label, mid_label, hi_label],
                verdict or "undecided",
                min(d1.processes, d2.processes),
                comparison_dict(d1),
                comparison_dict(d2),
                s["_sweep"],
                mid_build,
            )
        )
        if verdict is None:
            rec.outcome = "undecided"
            return record(rec, out_dir, say)
        if verdict == BAD:
            hi, hi_label, last_effect = mid, mid_label, comparison_dict(d1)
        else:
            lo, lo_label, last_effect = mid, mid_label, comparison_dict(d2)
    first = commits[hi]
    rec.first_bad = first.as_dict() | {"label": first.label}
    rec.effect = last_effect
    rec.outcome = "found"
    return record(rec, out_dir, say)


__all__ = ["Bisection", "Step", "bisect", "check_spec"]
