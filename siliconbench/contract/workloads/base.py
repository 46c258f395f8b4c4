"""What every workload kind's contract module shares: strict settings, the configuration a kind expands to, the
context check, the facts every result may carry, and the settings of the kinds that start a server."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from ..engines import describe
from ..errors import UserError
from ..manifest import ModelManifest, sha256_path

Port = Annotated[int, Field(ge=1024, le=65535)]
Counts = Annotated[list[PositiveInt], Field(min_length=1)]
Lengths = Annotated[list[PositiveInt], Field(min_length=1)]
Depths = Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]
# Room the engines need past the tokens we ask for (BOS, the first generated token).
CTX_SLACK = 16

# Facts every job's result may carry in ``JobResult.extra`` beside its kind's own (each kind module's FACTS); a result
# whose extra holds a key neither declares is refused on write (siliconbench.contract.results.contract_problems).
COMMON_FACTS = frozenset(
    {
        "workload",  # the kind, as run
        "thermal",
        "busy",  # the gates' records (siliconbench/worker/measure/gate.py)
        "model_notes",  # what the model's manifest says every result must carry (a tokenizer mismatch allowed)
        "device_memory",  # a CUDA host's NVML peak and what the engine says it allocated (Engine.memory_facts)
        "source",
        "llama_bench",  # a result imported from llama-bench's output: where from, and its record as read
    }
)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Config:
    """One job configuration of a workload, before the engine is chosen."""

    n_prompt: int
    n_gen: int
    params: dict = field(default_factory=dict)
    n_depth: int = 0
    repetitions: int | None = None  # None: the sweep's
    warmup: int | None = None


# Each job carries a user's file's content (params "<setting>_body", beside "<setting>": its digest) up to this size: a
# book or a benchmark's prompts. A prompt file beyond it (a dataset: ShareGPT_V3 is ~640 MB) travels by digest alone:
# the job names where it was read ("<setting>_file", JobSpec.files, not its identity) and the sweep's store keeps
# its bytes once (siliconbench.storage.user_files).
MAX_USER_FILE_BYTES = 16 * 1024 * 1024
BODY_SUFFIX = "_body"
FILE_SUFFIX = "_file"


@dataclass(frozen=True)
class UserFile:
    path: Path
    raw: bytes
    text: str

    @property
    def travels_inline(self) -> bool:
        """Small enough to travel in each job (its parsed body); else by digest (JobSpec.files)."""
        return len(self.raw) <= MAX_USER_FILE_BYTES

    @property
    def digest(self) -> str:
        """What the job's identity holds in place of the file's name: a changed file is another benchmark."""
        return f"sha256:{hashlib.sha256(self.raw).hexdigest()}"


def file_digest(path: Path) -> str:
    """A user's file on disk named as ``UserFile.digest`` names the one read at expansion ("sha256:<hex>")."""
    return f"sha256:{sha256_path(path)}"


def read_user_file(path: str, where: str, what: str, limit: int | None = MAX_USER_FILE_BYTES) -> UserFile:
    """A file of the user's (a text to score, a prompt file), read and checked at expansion; at most ``limit`` bytes
    (None: any size, for a file that may travel by digest); a UserError naming ``where`` otherwise, nothing half-made."""
    p = Path(path).expanduser().absolute()
    if not p.is_file():
        raise UserError(where, f"{path!r} is not a file; give 'corpus' or the path of {what}.")
    raw = p.read_bytes()
    if limit is not None and len(raw) > limit:
        raise UserError(where, f"{path} is {len(raw):,} bytes; at most {limit:,} travel with each job.")
    try:
        return UserFile(p, raw, raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UserError(where, f"{path} is not UTF-8 text (byte {exc.start}: {exc.reason}).") from None


def fits(n: int, m: ModelManifest, where: str, what: str) -> None:
    if n > m.n_ctx:
        raise UserError(where, f"{what} = {n} tokens exceeds model {m.name!r}'s context of {m.n_ctx} tokens.")


class ServerSettings(Strict):
    server: Literal["llama-server", "llama_cpp.server"] = Field(
        "llama-server",
        description="llama.cpp's server: llama.cpp's own llama-server (parallel slots, continuous batching, a "
        "prompt cache), or llama-cpp-python's `python -m llama_cpp.server` (one request at a time: the server "
        "of results from before this choice). MLX's is mlx_lm.server either way.",
    )
    ready_timeout_s: PositiveFloat = Field(120.0, description="A server not ready by then fails the job")
    stop_timeout_s: PositiveFloat = Field(10.0, description="Grace after SIGTERM before SIGKILL")
    port: Port | None = Field(None, description="Fixed port on 127.0.0.1; default: a free one, picked once per job")


def server_params(w: ServerSettings) -> dict:
    # protocol 2: one identical request body for both servers (no seed, penalties off) and "ready" meaning a
    # completion was answered. Part of the job key, so results measured the old way are never pooled.
    return {"ready_timeout_s": w.ready_timeout_s, "stop_timeout_s": w.stop_timeout_s, "port": w.port, "protocol": 2}


def server_engine_params(
    w: ServerSettings, at: str, cfg: Config, engine: str, model: str, art, catalog, full=None, engines=()
) -> dict:
    """A server workload's ``engine_params``: the configuration's params plus which of the engine's servers runs,
    named only where it is not the one jobs ran before the choice existed (their ids and history stay)."""
    desc = describe(engine)
    chosen = w.server if w.server in desc.servers else desc.servers[0]
    return cfg.params if chosen == desc.unnamed_server else {**cfg.params, "server": chosen}


SERVER_FACTS = frozenset({"n_ctx", "server", "server_args", "ready_probe", "request", "slots"})
