"""The KL-divergence half of a perplexity job: its bases, and every window compared against them.

A job names its bases (``params.kld_bases``: each engine's full-precision form, by digest). Before the job's own
model loads, each base is read from the host's store or, missing, computed there by a fresh process of the
base's own engine (siliconbench/worker/quality/base_maker.py) on the job's very windows, and kept (siliconbench/worker/quality/bases.py).
The job whose artifact is a base produces that base from its own pass instead. Figures against the job's own engine's base are the
``kld_*`` metrics; against the other engine's, ``cross_kld_*``: an MLX 4-bit against the GGUF F32 base and a
Q4_K_M against the MLX f32 one, so two engines' quantizations are compared to one original.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from siliconbench.contract.errors import WorkloadError

from siliconbench.worker.quality import base_maker, bases as store
from siliconbench.worker.quality.kld import BaseRows, RowStats, base_rows, compare, summary
from siliconbench.worker.workloads.common import Context

OWN_METRICS = ("kld_mean", "kld_median", "kld_p90", "kld_p99", "kld_p999", "kld_max", "same_top_pct")
CROSS_METRICS = ("kld_mean", "kld_p99", "same_top_pct")


@dataclass
class Base:
    spec: dict  # {engine, quant, sha256, artifact}
    key: store.BaseKey
    own: bool  # the job's own artifact and engine: produced by its pass
    rows: list[BaseRows] | None = None
    computed_here: bool = False
    stats: list[RowStats] = field(default_factory=list)
    summary: dict = field(default_factory=dict)


class BaseSet:
    def __init__(
        self, ctx: Context, specs: list[dict], tokens_sha256: str, first: int, chunks: list[list[int]], n_ctx: int
    ):
        self.ctx, self.first, self.chunks, self.n_ctx = ctx, first, chunks, n_ctx
        job = ctx.job
        self.bases = [
            Base(
                s,
                store.BaseKey(s["engine"], s["sha256"], tokens_sha256, first),
                own=s["engine"] == job.engine and s["artifact"] == job.artifact,
            )
            for s in specs
        ]

    def prepare(self) -> None:
        for b in self.bases:
            b.rows = store.load(b.key, self.ctx.models_dir)
            if b.rows is not None:
                continue
            b.computed_here = True
            if b.own:
                b.rows = []  # filled window by window from the job's own logits
            else:
                b.rows = self._compute(b)  # made and stored by a process of the base's own engine

    def _compute(self, b: Base) -> list[BaseRows]:
        path = self.ctx.models_dir / b.spec["artifact"]
        if not path.exists():
            raise WorkloadError(
                f"the KL-divergence base {b.spec['engine']} {b.spec['quant']} ({b.spec['artifact']}) "
                "is not on this host: add that form here, or run the job where it is"
            )
        self.ctx.emit("kld_base", engine=b.spec["engine"], quant=b.spec["quant"])
        job = self.ctx.job
        # the job's threads for either engine; its other options only where the base runs on its own engine
        options = (
            dict(job.engine_options)
            if b.spec["engine"] == job.engine
            else {"threads": job.engine_options.get("threads")}
        )
        return base_maker.make(self.ctx.models_dir, b.spec, b.key, self.chunks, self.first, self.n_ctx, options)

    def window(self, i: int, logits, targets: list[int]) -> dict[str, float]:
        """Compare window ``i``'s logits with every base; {'window_kld': mean KLD against the own engine's base}."""
        out: dict[str, float] = {}
        for b in self.bases:
            if b.own and b.computed_here:
                b.rows.append(base_rows(logits))
            try:
                s = compare(logits, b.rows[i], targets)
            except ValueError as e:
                raise WorkloadError(
                    f"KL-divergence against {b.spec['engine']} {b.spec['quant']}: {e} (the two "
                    "forms' vocabularies differ in size)"
                ) from None
            b.stats.append(s)
            if b.spec["engine"] == self.ctx.job.engine:
                out["window_kld"] = float(s.kld.mean())
        return out

    def finish(self) -> dict[str, float]:
        """The job-scope metrics; a base this job produced from its own pass is kept for the next jobs."""
        out: dict[str, float] = {}
        for b in self.bases:
            if b.own and b.computed_here:
                store.save(b.key, self.ctx.models_dir, b.rows)
            s = b.summary = summary(b.stats)
            if b.spec["engine"] == self.ctx.job.engine:
                out.update({k: s[k] for k in OWN_METRICS})
            else:
                out.update({f"cross_{k}": s[k] for k in CROSS_METRICS})
        return out

    def describe(self) -> dict:
        """extra.kld: each base (engine, quant, digest, whether this job computed it) and its full statistics."""
        return {
            ("same" if b.spec["engine"] == self.ctx.job.engine else "cross"): {
                **{k: b.spec[k] for k in ("engine", "quant", "sha256")},
                "store": b.key.path(self.ctx.models_dir).name,
                "computed_here": b.computed_here,
                **b.summary,
            }
            for b in self.bases
        }
