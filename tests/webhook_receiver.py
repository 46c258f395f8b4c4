"""A real webhook receiver on loopback that checks signatures and can be told to fail, for the notification tests."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from siliconbench.coordinator.watch.notify import verify_signature

SECRET = "s3cret-for-tests"


class Receiver:
    """A webhook receiver on 127.0.0.1: answers 503 to the first ``fail_first`` requests, then 200 (dedupes on
    X-Siliconbench-Delivery, as receivers must); ``delay_s`` per request."""

    def __init__(self, port: int = 0, fail_first: int = 0, delay_s: float = 0.0):
        self.requests, self.accepted, self.lock = [], {}, threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                time.sleep(delay_s)
                with outer.lock:
                    outer.requests.append((dict(self.headers), body))
                    ok = len(outer.requests) > fail_first
                    if ok and verify_signature(SECRET, body, self.headers["X-Siliconbench-Signature"]):
                        outer.accepted.setdefault(self.headers["X-Siliconbench-Delivery"], []).append(body)
                self.send_response(200 if ok else 503)
                self.end_headers()
                self.wfile.write(b"ok" if ok else b"busy, try later")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
