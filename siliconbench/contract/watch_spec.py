"""The watch spec: which engine packages (and llama.cpp release tags) to follow, which suite (a sweep) to run on a new release, on which
hosts, how often to look, and where verdicts go. Validated like a sweep (``siliconbench.contract.spec``): unknown keys
refused, every error one ``UserError`` naming the field (``suite.`` prefixed inside the suite).

The stored form (``WatchSpec.stored()``, the ``watches.spec`` column) holds the suite inline and the index
folder as an absolute path, so the scheduler needs neither the watch file nor its folder.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

import yaml
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, ValidationError, field_validator

from .engines import PACKAGE_ENGINE
from .errors import UserError
from .spec import COMPARE_PROCESSES, HostFilter, SweepSpec, parse_sweep

# A followed package: one an engine pins (siliconbench/contract/engines.py); PACKAGE_ENGINE says which engine it moves.
Package = Literal["mlx-lm", "mlx", "llama-cpp-python"]
assert set(get_args(Package)) == set(PACKAGE_ENGINE), "Package must list exactly the engines' pinned packages"
EVERY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)\s*$", re.IGNORECASE)
UNIT_S = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MIN_EVERY_S = 60
MIN_PROCESSES = 4  # compare's Mann-Whitney test cannot reach p < 0.05 with fewer processes a side


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


LLAMA_CPP = "llama.cpp"  # what a campaign on llama.cpp tags names as its package, and the engine it moves
TAG = re.compile(r"^b(\d+)$")  # llama.cpp's release tags: b<build number>
ARCHIVE = re.compile(r"^llama-(b\d+)-bin-[\w.-]+?\.(zip|tar\.gz)$")  # its release archives
LLAMA_TOOLS = Literal["llama-bench", "llama-server", "llama-perplexity"]


class LlamaCppTags(Strict):
    """llama.cpp's release tags to follow: the ``b<N>`` tags of a git checkout, or the archives in a folder."""

    source: str | None = Field(
        None,
        description="A llama.cpp git checkout, at this path on the coordinator and on every target host (a shared "
        "mount, or a clone at the same path; `~/…` is each machine's own home, and a worker with "
        "SILICONBENCH_LLAMA_SOURCE set builds from that checkout instead): its b<N> tags are the versions; each is "
        "built on the hosts",
    )
    archives: str | None = Field(
        None, description="A folder of llama.cpp release archives (llama-b<N>-bin-<platform>.zip or .tar.gz)"
    )
    fetch: bool = Field(
        True, description="git fetch --tags in the checkout before each look (where the remote can be reached)"
    )
    cmake_flags: list[str] = Field(default_factory=list, description="More -DNAME=VALUE for every build")
    tools: list[LLAMA_TOOLS] = Field(
        default_factory=lambda: ["llama-bench", "llama-server", "llama-perplexity"],
        description="The tools each build makes (llama-bench always: a bisection's yardstick)",
    )
    bisect: bool = Field(
        True, description="A confirmed regression of a tag starts a bisection to its commit (a checkout only)"
    )

    @field_validator("cmake_flags")
    @classmethod
    def _flags(cls, v: list[str]) -> list[str]:
        for flag in v:
            if not flag.startswith("-D"):
                raise ValueError(f"{flag!r}: give each flag as -DNAME=VALUE")
        return v

    @field_validator("tools")
    @classmethod
    def _bench(cls, v: list[str]) -> list[str]:
        if "llama-bench" not in v:
            raise ValueError("must include llama-bench (a build's own yardstick, and a bisection's)")
        return list(dict.fromkeys(v))


def version_key(package: str, version: str) -> tuple:
    """The order of a followed package's versions: a llama.cpp tag by its build number, a release by PEP 440.
    A version that is neither sorts first (it is never newer than one that is)."""
    if package == LLAMA_CPP:
        m = TAG.match(version)
        return (1, int(m.group(1))) if m else (0, 0)
    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, Version("0"))


class Notify(Strict):
    webhook: str = Field(
        description="http(s) URL that receives each verdict as signed JSON (siliconbench.coordinator.watch.notify)"
    )

    @field_validator("webhook")
    @classmethod
    def _http(cls, v: str) -> str:
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http:// or https:// URL with a host")
        return v


def every_seconds(text: str) -> float:
    """'30m', '6h', '1d' -> seconds; ValueError naming the form otherwise."""
    m = EVERY.match(str(text))
    if not m:
        raise ValueError("must be a number and a unit (s, m, h, d, w), e.g. 30m, 6h, 1d")
    return float(m.group(1)) * UNIT_S[m.group(2).lower()]


class WatchSpec(Strict):
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.\-]+$")
    description: str = ""
    packages: list[Package] = Field(default_factory=list, description="Engine packages whose releases to follow")
    llama_cpp: LlamaCppTags | None = Field(
        None, description="llama.cpp's release tags to follow, from a checkout or a folder of release archives"
    )
    suite: Any = Field(
        description="A sweep: a YAML file's path (relative to the watch file) or "
        "the sweep's mapping inline; it must not set engine_versions or processes"
    )
    hosts: Any = Field(None, description="The sweep's hosts: selector ('all', names, a filter); overrides the suite's")
    every: str = Field(description="How often to look at the index: 30m, 6h, 1d (at least 1 minute)")
    notify: Notify | None = None
    index: str | None = Field(
        None, description="A simple-index URL (PEP 503/691) or a folder of wheels; default SILICONBENCH_PACKAGE_INDEX"
    )
    processes: int = Field(
        COMPARE_PROCESSES,
        ge=MIN_PROCESSES,
        description="At most this many processes a side per series (the sequential design's last look)",
    )
    _suite: SweepSpec | None = PrivateAttr(None)

    @field_validator("packages")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("lists a package more than once")
        return v

    @field_validator("every", mode="before")
    @classmethod
    def _every(cls, v: object) -> object:
        if isinstance(v, (int, float, str)) and every_seconds(str(v)) < MIN_EVERY_S:
            raise ValueError("must be at least 1 minute (1m)")
        return v

    @field_validator("index")
    @classmethod
    def _index(cls, v: str | None) -> str | None:
        if v is None:
            return v
        parts = urlsplit(v)
        if parts.scheme in ("http", "https") and not parts.netloc:
            raise ValueError("an index URL needs a host")
        if parts.scheme not in ("", "http", "https", "file"):
            raise ValueError("must be an http(s) URL or a folder of wheels")
        return v

    @property
    def followed(self) -> list[str]:
        """The packages followed, llama.cpp's tags (package ``llama.cpp``) last."""
        return [*self.packages, *([LLAMA_CPP] if self.llama_cpp is not None else [])]

    @property
    def every_s(self) -> float:
        return every_seconds(self.every)

    @property
    def suite_spec(self) -> SweepSpec:
        """The suite, validated, with the watch's hosts selector in place of its own."""
        assert self._suite is not None, "made by parse_watch"
        return self._suite

    @property
    def host_selector(self):
        return self.suite_spec.hosts

    def stored(self) -> dict:
        """The JSON kept in ``watches.spec``: parse_watch(stored(), check_folders=False) gives this spec back."""
        return self.model_dump(mode="json", exclude_none=True)


_NAMES = TypeAdapter(Annotated[list[str], Field(min_length=1)])  # HostSelector's list member


def _check_hosts(value: Any) -> Any:
    """The sweep's selector (``spec.HostSelector``), each member validated by the input's shape, so the error names
    the field rather than a union tag."""
    if isinstance(value, dict):
        return HostFilter.model_validate(value)
    if isinstance(value, list):
        return _NAMES.validate_python(value)
    if value != "all":
        raise _Invalid(
            "hosts",
            "must be 'all', a list of worker names, or a filter (chip, min_memory_gb, engine, model, gpu_cores).",
        )
    return value


class _Invalid(Exception):
    def __init__(self, field: str, message: str):
        self.field, self.message = field, message


def _field(loc: tuple) -> str:
    parts: list[str] = []
    for p in loc:
        if isinstance(p, int):
            parts[-1:] = [f"{parts[-1]}[{p}]" if parts else f"[{p}]"]
        else:
            parts.append(str(p))
    return ".".join(parts) or "watch"


def _known(model: type[BaseModel], loc: tuple) -> list[str]:
    for p in loc[:-1]:
        ann = model.model_fields[p].annotation if isinstance(p, str) and p in model.model_fields else None
        for t in getattr(ann, "__args__", (ann,)):
            if isinstance(t, type) and issubclass(t, BaseModel):
                model = t
    return sorted(f.alias or n for n, f in model.model_fields.items())


def _user_error(exc: ValidationError, model: type[BaseModel], prefix: tuple = ()) -> UserError:
    errors = exc.errors()
    # A misspelt key also leaves its field missing: name the misspelling, it is the one to fix.
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = prefix + tuple(err["loc"])
    msg = err["msg"].removeprefix("Value error, ").rstrip(".") + "."
    if err["type"] == "extra_forbidden":
        msg = f"unknown setting. Known settings here: {', '.join(_known(model, tuple(err['loc'])))}."
    choices = None
    if err["type"] == "literal_error":
        choices = [
            c.strip(" '")
            for c in str(err.get("ctx", {}).get("expected", "")).replace(" or ", ",").split(",")
            if c.strip()
        ]
    return UserError(_field(loc), msg, choices)


def _read_yaml(path: Path, field: str) -> object:
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise UserError(field, f"cannot read {path}: {exc.strerror}.") from None
    except yaml.YAMLError as exc:
        raise UserError(field, f"{path} is not valid YAML: {exc}") from None


def _suite(spec: WatchSpec, base_dir: Path) -> tuple[dict, SweepSpec]:
    data = spec.suite
    if isinstance(data, str):
        data = _read_yaml((base_dir / data).expanduser(), "suite")
    elif not isinstance(data, dict):
        raise UserError("suite", "must be a sweep: the path of its YAML file, or its mapping inline.")
    try:
        sweep = parse_sweep(data)
    except UserError as exc:
        raise UserError("suite" if exc.field == "sweep" else f"suite.{exc.field}", exc.message, exc.choices) from None
    for key, why in (
        ("engine_versions", "the campaign sets the engine versions (baseline and candidate)"),
        ("processes", "the watch's `processes:` caps the processes a side"),
    ):
        if key in data:
            raise UserError(f"suite.{key}", f"must not be set in a watch's suite: {why}.")
    for i, package in enumerate(spec.packages):
        if PACKAGE_ENGINE[package] not in sweep.engines:
            raise UserError(
                f"packages[{i}]",
                f"{package} moves engine {PACKAGE_ENGINE[package]}, which the suite's "
                f"engines ({', '.join(sweep.engines)}) do not list.",
            )
    if spec.llama_cpp is not None and LLAMA_CPP not in sweep.engines:
        raise UserError(
            "llama_cpp",
            f"llama.cpp's tags move engine llama.cpp, which the suite's engines ({', '.join(sweep.engines)}) do not list.",
        )
    return data, sweep


def _llama_cpp(tags: LlamaCppTags, base: Path, check_folders: bool) -> LlamaCppTags:
    """Exactly one of source / archives, as an absolute path; with ``check_folders``, a folder that is there (a
    checkout holding include/llama.h)."""
    if (tags.source is None) == (tags.archives is None):
        raise UserError(
            "llama_cpp", "give one of source (a llama.cpp git checkout) or archives (a folder of releases)."
        )
    key = "source" if tags.source is not None else "archives"
    given = getattr(tags, key)
    folder = Path(given).expanduser()
    folder = folder if folder.is_absolute() else base / folder
    # `~/…` stays as written: each machine (the coordinator, every worker) expands it to its own home
    kept = given if given.startswith("~") else str(folder)
    if check_folders:
        if not folder.is_dir():
            raise UserError(f"llama_cpp.{key}", f"no folder {folder}.")
        if key == "source" and not ((folder / ".git").exists() and (folder / "include" / "llama.h").is_file()):
            raise UserError(
                "llama_cpp.source", f"{folder} is not a llama.cpp git checkout (no .git and include/llama.h)."
            )
    if key == "archives" and tags.bisect and "bisect" in tags.model_fields_set:
        raise UserError("llama_cpp.bisect", "a bisection needs the commits between two tags: follow a source checkout.")
    return tags.model_copy(update={key: kept, "bisect": tags.bisect and key == "source"})


def parse_watch(data: object, *, base_dir: Path | str | None = None, check_folders: bool = True) -> WatchSpec:
    """Validate a watch (parsed YAML or the stored JSON). ``base_dir`` anchors a relative suite path and index
    folder; ``check_folders`` (the `add` path) requires the index folder to exist here."""
    if not isinstance(data, dict):
        raise UserError(
            "watch", "a watch must be a YAML mapping with at least `name`, `packages`, `suite` and `every`."
        )
    base = Path(base_dir or ".").expanduser().resolve()
    try:
        spec = WatchSpec.model_validate(data)
    except ValidationError as exc:
        raise _user_error(exc, WatchSpec) from None
    if not spec.packages and spec.llama_cpp is None:
        raise UserError(
            "packages",
            "the watch follows nothing: list at least one package, or llama.cpp's tags (llama_cpp: {source: DIR}).",
            list(PACKAGE_ENGINE),
        )
    llama = _llama_cpp(spec.llama_cpp, base, check_folders) if spec.llama_cpp is not None else None
    try:
        hosts = None if spec.hosts is None else _check_hosts(spec.hosts)
    except _Invalid as exc:
        raise UserError(exc.field, exc.message) from None
    except ValidationError as exc:
        raise _user_error(exc, HostFilter, ("hosts",)) from None
    suite, sweep = _suite(spec, base)
    if hosts is not None:
        sweep = sweep.model_copy(update={"hosts": hosts})
    index = spec.index
    if index is not None and urlsplit(index).scheme not in ("http", "https"):
        folder = Path(urlsplit(index).path if index.startswith("file:") else index).expanduser()
        folder = folder if folder.is_absolute() else base / folder
        if check_folders and not folder.is_dir():
            raise UserError("index", f"no folder {folder} (a local index is a folder of wheels, pip's --find-links).")
        index = str(folder)
    if isinstance(hosts, HostFilter):
        hosts = hosts.model_dump(exclude_none=True)
    out = spec.model_copy(update={"suite": suite, "index": index, "hosts": hosts, "llama_cpp": llama})
    out._suite = sweep
    return out


def load_watch(path: Path | str) -> WatchSpec:
    path = Path(path)
    if not path.is_file():
        raise UserError("FILE", f"no watch file {path}.")
    return parse_watch(_read_yaml(path, "FILE"), base_dir=path.parent)
