"""A real package index for watch tests: two real mlx-lm releases downloaded once from the registry, as a
--find-links folder or served as a simple index (PEP 503 HTML, PEP 691 JSON) by a local HTTP server.

``local_index(tmp_path_factory)``: a folder holding both wheels. ``folder_with(versions, dest)``: a folder holding
only those versions' wheels (hard links into the cache), to which a test can add the next release later.
``SimpleIndex(folder)``: the folder served on 127.0.0.1 (``.url`` is the index URL, ``/files/NAME`` the files).
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import subprocess
import sys
import tempfile
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import unquote

from packaging.utils import canonicalize_name, parse_wheel_filename

from tests.http_files import LoopbackServer
from tests.kept import kept_dir, link_or_copy

PACKAGE = "mlx-lm"
RELEASES = ("0.31.3", "0.32.2")  # two real releases, pure-Python wheels (installable on Linux too)
CACHE = kept_dir("index-wheels")  # CI downloads them once
JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def wheel_of(version: str) -> Path:
    """The cached wheel of mlx-lm ``version``, downloaded from the registry the first time."""
    CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(CACHE.glob(f"mlx_lm-{version}-*.whl"))
    if not found:
        with tempfile.TemporaryDirectory(dir=CACHE) as tmp:  # a download cut short leaves no half file
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--only-binary",
                    ":all:",
                    f"{PACKAGE}=={version}",
                    "-d",
                    tmp,
                ],
                check=True,
                capture_output=True,
                timeout=600,
            )
            for p in Path(tmp).glob("*.whl"):
                os.replace(p, CACHE / p.name)
        found = sorted(CACHE.glob(f"mlx_lm-{version}-*.whl"))
    assert found, f"pip download left no wheel of {PACKAGE} {version} in {CACHE}"
    return found[0]


def folder_with(versions, dest: Path | None = None) -> Path:
    """``dest`` (default: a new temporary folder) holding the wheels of ``versions`` too; returns it."""
    dest = Path(dest or tempfile.mkdtemp(prefix="index-"))
    dest.mkdir(parents=True, exist_ok=True)
    for v in versions:
        src = wheel_of(v)
        if not (dest / src.name).exists():
            link_or_copy(src, dest / src.name)
    return dest


def local_index(tmp_path_factory) -> Path:
    """A --find-links folder holding both real releases (for a session fixture)."""
    return folder_with(RELEASES, tmp_path_factory.mktemp("index"))


class SimpleIndex(LoopbackServer):
    """``folder`` served as a simple index on 127.0.0.1: /simple/, /simple/<project>/ (JSON when the client asks
    and ``json_api``, else HTML), /files/<name>. Filenames in ``yanked`` are marked yanked (PEP 592)."""

    def __init__(self, folder: Path, *, json_api: bool = True, yanked: set[str] = frozenset()):
        self.folder, self.json_api, self.yanked, self.requests = Path(folder), json_api, set(yanked), []
        super().__init__(self._handler())
        self.url = f"{self.base_url}/simple/"

    def files(self, project: str) -> list[Path]:
        out = []
        for p in sorted(self.folder.glob("*.whl")):
            if canonicalize_name(parse_wheel_filename(p.name)[0]) == canonicalize_name(project):
                out.append(p)
        return out

    def _handler(self):
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet test output
                pass

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                index.requests.append((self.path, self.headers.get("Accept", "")))
                parts = [unquote(p) for p in self.path.split("?")[0].split("/") if p]
                if parts[:1] == ["files"] and len(parts) == 2 and (index.folder / parts[1]).is_file():
                    return self._send(200, (index.folder / parts[1]).read_bytes(), "application/octet-stream")
                if parts == ["simple"]:
                    names = sorted(
                        {canonicalize_name(parse_wheel_filename(p.name)[0]) for p in index.folder.glob("*.whl")}
                    )
                    links = "".join(f'<a href="{n}/">{n}</a>\n' for n in names)
                    return self._send(200, f"<!DOCTYPE html><html><body>{links}</body></html>".encode(), "text/html")
                if len(parts) == 2 and parts[0] == "simple" and index.files(parts[1]):
                    return self._project(parts[1])
                self._send(404, b"not found", "text/plain")

            def _project(self, project: str) -> None:
                files = [(p.name, hashlib.sha256(p.read_bytes()).hexdigest()) for p in index.files(project)]
                if index.json_api and JSON_TYPE in self.headers.get("Accept", ""):
                    doc = {
                        "meta": {"api-version": "1.0"},
                        "name": canonicalize_name(project),
                        "files": [
                            {"filename": n, "url": f"/files/{n}", "hashes": {"sha256": h}, "yanked": n in index.yanked}
                            for n, h in files
                        ],
                    }
                    return self._send(200, json.dumps(doc).encode(), JSON_TYPE)
                mark = {n: ' data-yanked=""' if n in index.yanked else "" for n, _ in files}
                links = "".join(
                    f'<a href="/files/{html.escape(n)}#sha256={h}"{mark[n]}>{html.escape(n)}</a><br/>\n'
                    for n, h in files
                )
                self._send(200, f"<!DOCTYPE html><html><body>{links}</body></html>".encode(), "text/html")

        return Handler
