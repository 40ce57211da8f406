"""The bench server's answers from a plain threaded Python server: ``http.server``'s
``ThreadingHTTPServer`` (HTTP/1.1 keep-alive, a thread per connection), latency by ``time.sleep``.

:mod:`benchmarks.bench_server` costs (almost) nothing per request; this one costs what a plain
Python service does (the stdlib's header parsing, a thread woken per request, the GIL). The
answers are bench_server's, byte for byte: the same rendered :class:`Bodies`, and each request
answered by bench_server's own ``Connection.answer`` (credentials, the countdown of searches
left, the ``/_bench/*`` control endpoints), under a lock; the sleep comes after, outside it.

    python -m benchmarks.threaded_server --port 0 --players 2000 --latency-ms 20
    # prints "listening http://127.0.0.1:PORT" on stdout once every body is rendered
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from benchmarks.bench_server import Connection, State, arguments, render
from benchmarks.common import BenchServer


class _Request(Connection):
    """One parsed request for bench_server's ``answer`` (no transport, no parser)."""

    def __init__(self, state: State, url: bytes, headers: dict[str, bytes | None]) -> None:
        self.state = state
        self.url = url
        # bench_server's on_message_begin sets these to None, which is all mypy infers of them
        self.accept, self.agent = headers["accept"], headers["user-agent"]  # type: ignore[assignment]
        self.user, self.password = headers["username"], headers["password"]  # type: ignore[assignment]


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # bench_server's backlog

    def __init__(self, address: tuple[str, int], state: State) -> None:
        super().__init__(address, Handler)
        self.state = state
        self.lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every answer carries its Content-Length
    disable_nagle_algorithm = True
    server: Server

    def do_GET(self) -> None:
        raw = {
            name: (None if value is None else value.encode("latin-1"))
            for name in ("accept", "user-agent", "username", "password")
            for value in [self.headers.get(name)]
        }
        request = _Request(self.server.state, self.path.encode("latin-1"), raw)
        with self.server.lock:
            response = request.answer()
            delay = self.server.state.latency
        if delay > 0:
            time.sleep(delay)
        self.wfile.write(response)

    def log_message(self, format: str, *args: object) -> None:
        pass


class ThreadedBenchServer(BenchServer):
    """:class:`benchmarks.common.BenchServer` (start, reset, latency, stats, stop) on this module."""

    MODULE = "benchmarks.threaded_server"


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__.split("\n\n")[0]).parse_args(argv)
    bodies, _ = render(args.seed, args.players, date.fromisoformat(args.today), min(args.distinct, args.players), args.shape)
    server = Server((args.host, args.port), State(bodies, args.quota, args.latency_ms, args.accounts))
    gc.collect()
    gc.freeze()
    sizes = bodies.sizes
    print(
        f"listening http://{args.host}:{server.server_address[1]} ({len(sizes)} summaries, "
        f"mean {sum(sizes) / max(1, len(sizes)) / 1000:.1f} KB, rendered in {bodies.render_s:.1f} s, threaded)",
        flush=True,
    )
    server.serve_forever()  # until SIGTERM (BenchServer.stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
