"""A SOURCE of `models add`, made into files on this machine and the origin the manifest records.

    /path/model-Q4_K_M.gguf              a GGUF file (a split set by its -00001-of-0000N part)
    /path/folder                         an MLX or Hugging Face folder (config.json + *.safetensors)
    file:///Volumes/models/...           the same on a shared folder: other workers copy it from there
    https://host/model-Q4_K_M.gguf       a GGUF downloaded into the models folder (resumable)
    hf:ORG/REPO[@REVISION][:PATTERN]     a Hugging Face Hub repository, through huggingface_hub's cache

Hub files stay in the standard Hugging Face cache (``HF_HUB_CACHE`` / ``HF_HOME``; ``HF_HUB_OFFLINE`` and
``HF_TOKEN`` are huggingface_hub's own), where llama.cpp's ``-hf`` and mlx-lm look too: nothing is copied.
"""

from __future__ import annotations

import fnmatch
import re
import socket
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from siliconbench.contract.errors import UserError
from siliconbench.contract.manifest import Origin

from siliconbench.worker.models.digests import ByteProgress
from siliconbench.worker.models.download import fetch_file, join, local_path
from siliconbench.worker.models.facts import MLX_PATTERNS, SPLIT

HF_REF = re.compile(r"^hf:(?P<repo>[\w.-]+/[\w.-]+)(?:@(?P<rev>[^:]+))?(?::(?P<pattern>.+))?$")
DOWNLOADS = ".downloads"  # in the models folder: where http(s) GGUF files land


@dataclass
class Resolved:
    source: str  # as the user wrote it
    path: Path  # on this machine: the GGUF (first part) or the folder
    origin: Origin


def resolve(source: str, models_dir: Path, progress: ByteProgress | None = None) -> Resolved:
    if source.startswith("hf:"):
        return resolve_hf(source)
    scheme = urllib.parse.urlsplit(source).scheme
    if scheme == "file":
        path = local_path(source)
        _exists(path, source)
        return Resolved(source, path, Origin(kind="url", location=source.rstrip("/")))
    if scheme in ("http", "https"):
        name = Path(urllib.parse.urlsplit(source).path).name
        if not name.lower().endswith(".gguf") or SPLIT.match(name):
            raise UserError(
                "source",
                f"{source}: an http(s) source is one GGUF file; add a folder or a split set "
                "from hf:, file:// or a path.",
            )
        dest = Path(models_dir) / DOWNLOADS / urllib.parse.urlsplit(source).netloc / name
        if not dest.is_file():
            fetch_file(source, dest, progress=progress)
        return Resolved(source, dest, Origin(kind="url", location=source))
    if scheme:
        raise UserError("source", f"{source}: unknown scheme {scheme!r}; a path, file://, http(s):// or hf:ORG/REPO.")
    path = Path(source).expanduser().absolute()
    _exists(path, source)
    return Resolved(source, path, Origin(kind="path", location=str(path), host=socket.gethostname()))


def _exists(path: Path, source: str) -> None:
    if not path.exists():
        raise UserError("source", f"{source}: no such file or folder.")


def gguf_patterns(pattern: str) -> list[str]:
    """``:Q4_K_M`` means the GGUF files of that quant (split parts included); a glob is taken as written."""
    if any(c in pattern for c in "*?["):
        return [pattern]
    return [f"*{pattern}*.gguf", f"*{pattern.lower()}*.gguf", f"*{pattern.upper()}*.gguf"]


def resolve_hf(source: str, *, revision: str | None = None, files: list[str] | None = None) -> Resolved:
    """The repository's files in the Hugging Face cache (downloaded there if missing and online).

    ``files``: exactly these paths (a worker fetching what the manifest lists); otherwise the pattern's GGUF
    files, or mlx-lm's file list for a folder."""
    m = HF_REF.match(source)
    if not m:
        raise UserError("source", f"{source}: write a Hub source as hf:ORG/REPO[@REVISION][:PATTERN].")
    repo, pattern = m["repo"], m["pattern"]
    allow = files or (gguf_patterns(pattern) if pattern else list(MLX_PATTERNS))
    snapshot = _snapshot(source, repo, revision or m["rev"], allow)
    present = sorted(str(p.relative_to(snapshot)) for p in snapshot.rglob("*") if p.is_file())
    matched = [f for f in present if any(fnmatch.fnmatch(f, pat) for pat in allow)]
    origin = Origin(kind="hf", location=repo, revision=snapshot.name, pattern=pattern)
    if files:
        missing = sorted(set(files) - set(matched))
        if missing:
            raise UserError("source", f"{source} at {snapshot.name[:12]} lacks {', '.join(missing)}.")
        return Resolved(source, snapshot, origin)
    if not pattern:
        if "config.json" not in matched:
            raise UserError(
                "source",
                f"{source}: the repository has no config.json at {snapshot.name[:12]}; name "
                "its GGUF files with :PATTERN (hf:ORG/REPO:Q4_K_M).",
            )
        return Resolved(source, snapshot, origin)
    ggufs = [f for f in matched if f.lower().endswith(".gguf")]
    firsts = [f for f in ggufs if not SPLIT.match(Path(f).name) or SPLIT.match(Path(f).name)["no"] == "00001"]
    if not firsts:
        raise UserError("source", f"{source}: no GGUF file of {repo} at {snapshot.name[:12]} matches {pattern!r}.")
    if len(firsts) > 1:
        raise UserError(
            "source",
            f"{source}: {pattern!r} matches {len(firsts)} GGUF files ({', '.join(firsts)}); "
            "give a pattern that names one.",
        )
    sub = str(Path(firsts[0]).parent)
    return Resolved(source, snapshot / firsts[0], origin.model_copy(update={"subfolder": None if sub == "." else sub}))


def _snapshot(source: str, repo: str, revision: str | None, allow: list[str]) -> Path:
    import huggingface_hub  # only a Hub source needs it (mlx-lm depends on it)
    from huggingface_hub import errors

    try:
        return Path(huggingface_hub.snapshot_download(repo, revision=revision, allow_patterns=allow))
    except errors.LocalEntryNotFoundError as exc:
        raise UserError(
            "source",
            f"{source}: not in the Hugging Face cache ({huggingface_hub.constants.HF_HUB_CACHE}) "
            "and the Hub cannot be reached"
            + (" (HF_HUB_OFFLINE is set)" if huggingface_hub.constants.HF_HUB_OFFLINE else "")
            + ".",
        ) from exc
    except errors.RepositoryNotFoundError as exc:
        raise UserError(
            "source", f"{source}: no repository {repo} on the Hub (or it is private: set HF_TOKEN)."
        ) from exc
    except errors.RevisionNotFoundError as exc:
        raise UserError("source", f"{source}: {repo} has no revision {revision!r}.") from exc
    except errors.HfHubHTTPError as exc:
        raise UserError("source", f"{source}: the Hub refused: {exc}") from exc


def file_urls(origin: Origin, rels: list[str], directory: bool) -> list[str]:
    """Where each of an artifact's files is, under a ``url`` origin (a GGUF's parts lie beside its URL)."""
    base = origin.location if directory else origin.location.rsplit("/", 1)[0]
    return [join(base, rel) for rel in rels]
