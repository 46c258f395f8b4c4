"""The versions a package index offers: a simple index over HTTP (PEP 691 JSON, else PEP 503 HTML) or a local
folder of wheels and sdists (pip's --find-links), read the way pip reads them.

Versions come from the file names (``packaging.utils``), so both index forms and a folder agree; a version
counts as yanked (PEP 592) only when every file of it is. Pre-releases and yanked versions are left out
unless asked for. Any failure to read the index is a ``PackageIndexError`` naming the index.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from siliconbench.contract.errors import SiliconbenchError

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
# PEP 691's recommended Accept: JSON preferred, the HTML forms as fallbacks for a PEP 503-only index.
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
TIMEOUT_S = 20.0
SDIST_SUFFIXES = (".tar.gz", ".zip")


class PackageIndexError(SiliconbenchError):
    """The index could not be read (unreachable, no such project, a malformed page); the message names it."""


def is_url(index: str) -> bool:
    return urlsplit(index).scheme in ("http", "https")


def find_links_for(index: str) -> str | None:
    """The folder to hand pip as --find-links for this index, or None for an HTTP index."""
    if is_url(index):
        return None
    return unquote(urlsplit(index).path) if index.startswith("file:") else index


def index_url_for(index: str) -> str | None:
    """The URL to hand pip as --index-url for this index, or None for a local folder."""
    return index.rstrip("/") + "/" if is_url(index) else None


def _version_of(filename: str, package: str) -> Version | None:
    """The version a distribution file holds, if it is one of ``package``'s (None for anything else)."""
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        elif filename.endswith(SDIST_SUFFIXES):
            name, version = parse_sdist_filename(filename)
        else:
            return None
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return version if name == canonicalize_name(package) else None


def _select(files: list[tuple[str, bool]], package: str, *, pre: bool, yanked: bool) -> list[str]:
    """(filename, yanked) pairs -> the package's versions, oldest first."""
    seen: dict[Version, bool] = {}  # version -> every file so far yanked
    for filename, is_yanked in files:
        v = _version_of(filename, package)
        if v is not None:
            seen[v] = seen.get(v, True) and is_yanked
    return [str(v) for v in sorted(seen) if (pre or not v.is_prerelease) and (yanked or not seen[v])]


def _folder_files(folder: Path) -> list[tuple[str, bool]]:
    if not folder.is_dir():
        raise PackageIndexError(f"package index {folder}: no such folder (a local index is a folder of wheels).")
    return [(p.name, False) for p in folder.iterdir() if p.is_file()]


class _Anchors(HTMLParser):
    """PEP 503: each file an <a>, its text the filename; ``data-yanked`` present means yanked."""

    def __init__(self):
        super().__init__()
        self.files: list[tuple[str, bool]] = []
        self._href: tuple[str, bool] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            a = dict(attrs)
            path = urlsplit(a.get("href") or "").path
            self._href = (unquote(path.rsplit("/", 1)[-1]), "data-yanked" in a)

    def handle_endtag(self, tag):
        if tag == "a" and self._href:
            self.files.append(self._href)
            self._href = None


def _http_files(index: str, package: str, timeout_s: float) -> list[tuple[str, bool]]:
    url = urljoin(index.rstrip("/") + "/", canonicalize_name(package) + "/")
    req = urllib.request.Request(url, headers={"Accept": ACCEPT, "User-Agent": "siliconbench-watch"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            ctype = resp.headers.get_content_type()
            body = resp.read()
    except urllib.error.HTTPError as exc:
        what = f"has no project {package}" if exc.code == 404 else f"answered HTTP {exc.code} for {url}"
        raise PackageIndexError(f"package index {index} {what}.") from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:  # refused, timed out, DNS, a malformed URL
        reason = getattr(exc, "reason", exc)
        raise PackageIndexError(f"package index {index} is unreachable ({url}: {reason}).") from exc
    try:
        if ctype == JSON_TYPE:
            return [(f["filename"], bool(f.get("yanked"))) for f in json.loads(body)["files"]]
        parser = _Anchors()
        parser.feed(body.decode("utf-8", errors="replace"))
        return parser.files
    except (ValueError, KeyError, TypeError) as exc:
        raise PackageIndexError(f"package index {index}: {url} is not a simple-index page ({exc}).") from exc


def versions(
    package: str, index: str, *, pre: bool = False, yanked: bool = False, timeout_s: float = TIMEOUT_S
) -> list[str]:
    """The package's versions on the index (a URL or a folder), oldest first by packaging.version."""
    if is_url(index):
        files = _http_files(index, package, timeout_s)
    else:
        files = _folder_files(Path(find_links_for(index) or index).expanduser())
    return _select(files, package, pre=pre, yanked=yanked)
