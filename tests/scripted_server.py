"""A real HTTP server on loopback that plays a script of responses.

For client behaviour that needs an exact sequence (a 500 then a 200, a body cut short) the
sandbox's seeded faults are too coarse; this plays exactly what a test lists, over real HTTP,
and records every request it received.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    delay_s: float = 0.0
    content_length: int | None = None  # lie about the length to cut the connection short
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Received:
    method: str
    raw_path: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


@dataclass
class ScriptedServer:
    replies: deque[Reply] = field(default_factory=deque)
    default: Reply | None = None
    received: list[Received] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                split = urlsplit(self.path)
                with server._lock:
                    server.received.append(
                        Received(self.command, self.path, split.path, parse_qs(split.query), dict(self.headers), body)
                    )
                    reply = server.replies.popleft() if server.replies else server.default
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    assert reply is not None, "script ran out of replies"
                    time.sleep(reply.delay_s)
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    length = reply.content_length if reply.content_length is not None else len(reply.body)
                    self.send_header("Content-Length", str(length))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    if reply.content_length is not None:
                        self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(reply.body)
                    if reply.content_length is not None:
                        self.close_connection = True
                finally:
                    with server._lock:
                        server.in_flight -= 1

            do_GET = do_POST = _handle

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def play(self, *replies: Reply) -> ScriptedServer:
        self.replies.extend(replies)
        return self

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
