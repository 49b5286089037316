"""A second loopback HTTP server for the hostile-portal tests: it records every request it receives
(path and headers), serves fixed bodies, redirects, or trickles a body one byte at a time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Route:
    body: bytes = b""
    status: int = 200
    location: str = ""
    trickle_s: float = 0.0  # > 0: send the body one byte per `trickle_s` seconds


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]


class RecordingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes: dict[str, Route] = {}
        self.received: list[Recorded] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the crawler hanging up (deadline, caps) is what some tests want


class _Handler(BaseHTTPRequestHandler):
    server: RecordingServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.received.append(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}))
        route = self.server.routes.get(self.path.split("?", 1)[0], Route(b"not found", 404))
        self.send_response(route.status)
        if route.location:
            self.send_header("Location", route.location)
        self.send_header("Content-Type", "text/csv")
        self.send_header("Content-Length", str(len(route.body)))
        self.end_headers()
        if not route.trickle_s:
            self.wfile.write(route.body)
            return
        for i in range(len(route.body)):
            self.wfile.write(route.body[i : i + 1])
            self.wfile.flush()
            time.sleep(route.trickle_s)


@contextmanager
def recording_server() -> Iterator[RecordingServer]:
    server = RecordingServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
