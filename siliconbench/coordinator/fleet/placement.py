"""Which host runs which job: the hosts a sweep selects, what each can run, and why a job fits nowhere.

A job fits a host when the host is online, has the job's engine and the model (same digest) or can fetch it
(the artifact's origin is a shared folder, a URL or a Hugging Face repository: the worker fetches it before the
job, `JobSpec.fetch`), and the model file plus its KV cache fit in the host's memory with room for the OS.
Checked at submit time, so a sweep that cannot run is refused with the reasons instead of waiting silently in a
queue.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import JobSpec, digest
from siliconbench.contract.manifest import Artifact, ModelManifest
from siliconbench.contract.queues import capability_queue, host_queue
from siliconbench.contract.spec import HostFilter, SweepSpec

# Unified memory is shared with the OS and the GPU: leave a quarter of it, and 1 GiB of working room.
MEMORY_HEADROOM = 0.75
WORKING_BYTES = 1 << 30


@dataclass
class HostView:
    name: str
    hostname: str | None = None
    chip: str | None = None
    memory_bytes: int | None = None
    os: str | None = None
    details: dict = field(default_factory=dict)  # the platform's identity facts (hw.model, GPU cores, ...)
    engines: dict[str, str] = field(default_factory=dict)
    models: dict[str, dict] = field(default_factory=dict)  # name -> manifest dict
    online: bool = False
    last_heartbeat: object = None
    current_job_id: str | None = None
    jobs_done: int = 0
    jobs_failed: int = 0
    activity: dict | None = None  # a model being fetched (siliconbench/worker/models/fetch.py), with its progress

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["models"] = sorted(self.models)
        d["forms"] = self.models_text()
        d["activity"] = self.activity_text()
        return d

    def models_text(self) -> str:
        """Each model this host holds with its forms: ``smol (Q4_K_M, 4bit), tiny-llama-30m (F16, f32)``."""

        def forms(m: dict) -> str:
            quants = [a.get("quant", "?") for a in m.get("artifacts", [])]
            return f" ({', '.join(quants)})" if quants else ""

        return ", ".join(f"{n}{forms(m)}" for n, m in sorted(self.models.items()))

    def activity_text(self) -> str:
        a = self.activity or {}
        if a.get("kind") != "fetch":
            return ""
        total, done = a.get("total") or 0, a.get("done") or 0
        share = f" {done / total:.0%}" if total else ""
        return f"fetching {a.get('model')} {a.get('quant')}{share} ({done / 2**20:,.1f} of {total / 2**20:,.1f} MiB)"


@dataclass
class Placement:
    jobs: list[JobSpec]  # placed copies, in run order, with .host set where pinned
    queues: dict[str, str]  # job_id -> queue
    unplaceable: list[dict]  # {"job": label, "reasons": [...]}

    def assignments(self) -> dict[str, int]:
        return dict(Counter(self.queues.values()))


def kv_cache_bytes(m: ModelManifest, n_ctx: int, bytes_per_value: int = 2) -> int:
    """K and V for every layer at n_ctx positions, f16: computed from the model's shape (its declared head size)."""
    return 2 * m.n_layers * m.n_kv_heads * m.head_size * n_ctx * bytes_per_value


def select_hosts(spec: SweepSpec, hosts: list[HostView]) -> list[HostView]:
    sel = spec.hosts
    if sel == "all":
        return list(hosts)
    if isinstance(sel, list):
        known = {h.name: h for h in hosts}
        unknown = [n for n in sel if n not in known]
        if unknown:
            raise UserError("hosts", f"no registered worker named {unknown[0]!r}.", sorted(known))
        return [known[n] for n in sel]
    assert isinstance(sel, HostFilter)
    out = []
    for h in hosts:
        if sel.chip and sel.chip.lower() not in (h.chip or "").lower():
            continue
        if sel.min_memory_gb and (h.memory_bytes or 0) < sel.min_memory_gb * 2**30:
            continue
        if sel.engine and sel.engine not in h.engines:
            continue
        if sel.model and sel.model.lower() != str(h.details.get("model") or "").lower():
            continue
        if sel.gpu_cores and sel.gpu_cores != h.details.get("gpu_cores"):
            continue
        if sel.gpu and sel.gpu.lower() not in str((h.details.get("gpu") or {}).get("name") or "").lower():
            continue
        out.append(h)
    return out


def unfit_reasons(job: JobSpec, host: HostView, manifest: ModelManifest) -> list[str]:
    reasons = []
    if not host.online:
        reasons.append(f"{host.name} is offline")
    if job.engine not in host.engines:
        reasons.append(f"{host.name} has no {job.engine} installed")
    elif job.engine_version and job.engine_version not in [v.strip() for v in host.engines[job.engine].split(",")]:
        reasons.append(f"{host.name} has no {job.engine} {job.engine_version} environment (siliconbench env add)")
    local = host.models.get(job.model)
    art = artifact_of(job, manifest)
    if not holds(host, job):
        if art is not None and art.origin is not None and art.origin.fetchable:
            pass  # the worker fetches it before the job (JobSpec.fetch)
        elif art is not None and art.origin is not None and art.origin.kind == "path":
            reasons.append(
                f"{host.name} lacks {job.model} {job.quant}, whose files are {art.origin.location} on "
                f"{art.origin.host} only: run `siliconbench models add {job.model} <the file or folder> "
                f"--to-existing` on {host.name}, or add it from a source the fleet can reach "
                "(hf:ORG/REPO, https://..., or file:// on a shared folder)"
            )
        elif local is None:
            reasons.append(f"{host.name} lacks model {job.model}")
        else:
            reasons.append(f"{host.name} has a different {job.model} {job.quant} (digest differs)")
    art_size = art.size_bytes if art is not None else 0
    need = art_size + kv_cache_bytes(manifest, job.n_depth + job.n_prompt + job.n_gen) + WORKING_BYTES
    if host.memory_bytes and need > host.memory_bytes * MEMORY_HEADROOM:
        reasons.append(
            f"{host.name} has {host.memory_bytes / 2**30:.0f} GiB; the model and its KV cache need "
            f"{need / 2**30:.1f} GiB of the {MEMORY_HEADROOM:.0%} it can spare"
        )
    return reasons


def artifact_of(job: JobSpec, manifest: ModelManifest) -> Artifact | None:
    """The fleet manifest's artifact of the job (by digest); None where no host registered it."""
    return next((a for a in manifest.artifacts if a.sha256 == job.model_sha256), None)


def holds(host: HostView, job: JobSpec) -> bool:
    local = host.models.get(job.model)
    return local is not None and any(a.get("sha256") == job.model_sha256 for a in local.get("artifacts", []))


def fetch_payload(job: JobSpec, manifest: ModelManifest) -> dict | None:
    """What a worker lacking the job's artifact needs to fetch it (None where its origin cannot be fetched)."""
    art = artifact_of(job, manifest)
    if art is None or art.origin is None or not art.origin.fetchable:
        return None
    return {
        "manifest": manifest.model_dump(mode="json", exclude={"artifacts"}, exclude_none=True),
        "artifact": art.model_dump(mode="json", exclude_none=True),
    }


def place(
    spec: SweepSpec, jobs: list[JobSpec], hosts: list[HostView], manifests: dict[str, ModelManifest]
) -> Placement:
    """Pin or route every job; jobs stay in expansion order (model by model, engines alternating)."""
    selected = select_hosts(spec, hosts)
    if not any(h.online for h in selected):
        live = sorted(h.name for h in hosts if h.online)
        raise UserError(
            "hosts",
            "the sweep targets no live worker"
            + (
                f" (live: {', '.join(live)})"
                if live
                else "; start one with `siliconbench worker --broker URL --database URL`"
            )
            + ".",
        )
    placed: list[JobSpec] = []
    queues: dict[str, str] = {}
    unplaceable: list[dict] = []
    load: Counter = Counter()
    for job in jobs:
        why = {h.name: unfit_reasons(job, h, manifests[job.model]) for h in selected}
        fits = [h for h in selected if not why[h.name]]
        if not fits:
            unplaceable.append({"job": job.label(), "reasons": [r for rs in why.values() for r in rs]})
            continue
        if spec.placement == "each":
            targets = fits
        else:
            # One capability queue serves every live host that can run the job; use it when that set is
            # exactly the hosts that fit, otherwise pin to the least loaded fitting host.
            consumers = {h.name for h in hosts if h.online and job.engine in h.engines and job.model in h.models}
            if consumers == {h.name for h in fits} and all(holds(h, job) for h in fits):
                queues[job.job_id] = capability_queue(job.engine, job.model)
                placed.append(job)
                continue
            # a host that holds the model before one that would fetch it
            targets = [min(fits, key=lambda h: (not holds(h, job), load[h.name], h.name))]
        for h in targets:
            fetch = None if holds(h, job) else fetch_payload(job, manifests[job.model])
            copy = job.model_copy(update={"host": h.name, "fetch": fetch})
            copy.job_id = digest({"sweep": job.sweep_id, **copy.key()})
            queues[copy.job_id] = host_queue(h.name)
            load[h.name] += 1
            placed.append(copy)
    for i, j in enumerate(placed):
        j.index = i
    return Placement(jobs=placed, queues=queues, unplaceable=unplaceable)
