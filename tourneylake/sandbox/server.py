"""Run the sandbox: in a background thread (tests, ``make run``, Dagster) or in the foreground (CLI).

:class:`SandboxServer` binds a loopback socket itself (port 0 = an ephemeral port, known before
the server starts), runs uvicorn on it in a daemon thread, and stops it cleanly
(``should_exit`` + join) when the ``with`` block ends. Uvicorn logs at ``warning`` with no access
log; the deliberate aborts of the "drop" fault are filtered out of its error log.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from typing import Any

import uvicorn

from tourneylake.errors import TourneylakeError
from tourneylake.sandbox.accounts import DEMO, QUOTA_RESET_S, Accounts
from tourneylake.sandbox.app import Costs, DroppedConnection, SandboxApp
from tourneylake.sandbox.faults import Faults
from tourneylake.sandbox.world import World

__all__ = ["NotLoopback", "SandboxServer", "SandboxStartError", "running_sandbox", "serve_forever"]


class NotLoopback(TourneylakeError, ValueError):
    """The sandbox was asked to listen on an address that is not loopback."""


class SandboxStartError(TourneylakeError, RuntimeError):
    """The background server did not come up in time."""


class _DropFilter(logging.Filter):
    """Hide the tracebacks of deliberately dropped connections (they are not errors)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, DroppedConnection)


def _install_drop_filter() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _DropFilter) for f in logger.filters):
        logger.addFilter(_DropFilter())


def _config(app: SandboxApp, **kw: Any) -> uvicorn.Config:
    return uvicorn.Config(
        app.asgi,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
        **kw,
    )


def _as_date(today: date | str | None) -> date | None:
    return date.fromisoformat(today) if isinstance(today, str) else today


class SandboxServer:
    """The emulated service on ``host`` (loopback) in a background thread.

    ``seed`` fixes the world and the fault stream; ``latency_ms`` is added to every request
    (asynchronously, so parallel calls overlap); ``faults`` switches faults on; ``today`` pins the
    simulated day (``None`` follows the real UTC date; change it later with
    ``server.world.set_today``); ``players`` is the roster size; ``time_of_day`` pins response
    timestamps (byte-identical bodies across runs); ``demo_quota`` is the demo user's daily quota;
    ``quota_reset_s`` when every daily quota resets (seconds after midnight UTC, see
    :mod:`~tourneylake.sandbox.accounts`); ``costs`` and ``recent_tournaments`` tune metering and
    summaries.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int = 0,
        latency_ms: float = 0.0,
        faults: Faults | str | None = None,
        today: date | str | None = None,
        players: int = 200,
        *,
        time_of_day: int | None = None,
        demo_quota: int = 100_000,
        quota_reset_s: int = QUOTA_RESET_S,
        costs: Costs | None = None,
        recent_tournaments: int = 30,
    ) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise NotLoopback(f"the sandbox listens on loopback only (127.0.0.1, localhost or ::1), not {host!r}")
        self.host = host
        self.port = port
        self.faults = Faults.parse(faults) if isinstance(faults, str) or faults is None else faults
        self.world = World(seed, players, _as_date(today), time_of_day=time_of_day)
        self.accounts = Accounts(self.world, demo_quota, quota_reset_s=quota_reset_s)
        self.app = SandboxApp(
            self.world,
            self.accounts,
            faults=self.faults,
            seed=seed,
            latency_ms=latency_ms,
            costs=costs,
            recent_tournaments=recent_tournaments,
        )
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def api_url(self) -> str:
        """The demo application's root: ``{base_url}/api/demo``."""
        return f"{self.base_url}/api/{DEMO.appname}"

    def start(self, timeout: float = 10.0) -> SandboxServer:
        if self._thread is not None:
            return self
        _install_drop_filter()
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(128)
        sock.setblocking(False)
        self._socket = sock
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(_config(self.app))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=f"sandbox:{self.port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise SandboxStartError("the sandbox server did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> SandboxServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def running_sandbox(**kw: Any) -> Iterator[SandboxServer]:
    """``with running_sandbox(seed=1) as sandbox: ...`` — a started :class:`SandboxServer`."""
    server = SandboxServer(**kw)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def serve_forever(
    host: str = "127.0.0.1",
    port: int = 8765,
    seed: int = 0,
    latency_ms: float = 0.0,
    faults: Faults | str | None = None,
    players: int = 200,
    today: date | str | None = None,
    **kw: Any,
) -> None:
    """Serve in the foreground until interrupted (the ``tourneylake sandbox`` command)."""
    sandbox = SandboxServer(host, port, seed, latency_ms, faults, today, players, **kw)
    _install_drop_filter()
    print(
        f"tourneylake sandbox on {sandbox.base_url}/api/{DEMO.appname}/ "
        f"(seed {seed}, {players} players, faults: {sandbox.faults}); demo user {DEMO.username}",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.Server(_config(sandbox.app, host=host, port=port)).run()
