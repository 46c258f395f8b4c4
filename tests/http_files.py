"""A loopback HTTP file server with Range requests, that can cut a response half-way (a download that stops).

What an https:// model origin looks like to a worker, without the network: the same urllib code path.
"""

from __future__ import annotations

import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class LoopbackServer:
    """A ThreadingHTTPServer on 127.0.0.1 (a free port) serving in a daemon thread for a ``with`` block."""

    def __init__(self, handler: type):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class FileServer(LoopbackServer):
    def __init__(self, root: Path):
        self.root = Path(root)
        self.cut_after: int | None = None  # bytes: the next response stops there (the connection is closed)
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header) of each GET
        server = self

        class Handler(SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=str(server.root), **kw)

            def log_message(self, *_a):
                pass

            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Range")))
                path = Path(self.translate_path(self.path))
                if not path.is_file():
                    self.send_error(404)
                    return
                data = path.read_bytes()
                start = 0
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes=") and rng.endswith("-"):
                    start = int(rng[6:-1])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                body = data[start:]
                if server.cut_after is not None:
                    body, server.cut_after = body[: server.cut_after], None
                    self.wfile.write(body)
                    self.close_connection = True
                    return
                self.wfile.write(body)

        super().__init__(Handler)
        self.url = self.base_url
