"""A JSON HTTP server on loopback for tests: `answer(method, path, body) -> (status, body)` decides each reply, and
every request is kept (`requests`: method, path, body)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Answer = Callable[[str, str, object], tuple[int, object]]


class JsonServer:
    def __init__(self, answer: Answer, port: int = 0):
        self.answer, self.port, self.requests, self.httpd = answer, port, [], None

    def start(self) -> JsonServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                size = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(size) if size else b""
                body = json.loads(raw) if raw else None
                owner.requests.append((self.command, self.path, body))
                status, answer = owner.answer(self.command, self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    def __enter__(self) -> JsonServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
