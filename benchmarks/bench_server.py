"""A benchmark server that costs (almost) nothing per request: the sandbox world's answers,
rendered once, served as bytes from a dict.

The sandbox (:mod:`tourneylake.sandbox`) computes every summary in Python; on a two-core machine
its CPU hides the client's. This server renders every answer a night needs *before* it listens
(through a sandbox run in-process: metadata, its "cached" answer, countries, What's New, each
player's summary with the filter the night sends), then answers from a dict with a raw
``asyncio.Protocol`` + ``httptools`` (uvloop when installed): per request a header parse, a dict
lookup, two byte comparisons for the credentials and a ``join`` to splice in the searches left.
Latency is ``loop.call_later`` (a timer, no CPU, overlapping across connections).

What it answers (JSON only, ``Accept: application/json``; anything else is a plain 404):

- ``GET /api/{app}/metadata`` (``?hash=<current>``: the "cached" answer), free, no credentials;
- ``GET /api/{app}/metadata/countries`` and ``/news/whatsnew``: free, with ``UserInfo``;
- ``GET /api/{app}/networks/{network}/players/{player}/summary``: one search each; the
  ``RemainingSearches`` of every ``UserInfo`` counts down from ``--quota``;
- credentials: the ``Username`` and ``Password`` headers compared, as bytes, to the precomputed
  demo account's (else error 101001/101002, success="false", free); no ``User-Agent``: 101011;
  an unknown player: 200039. ``--accounts N`` adds ``bench1@example.com`` … ``benchN@…`` with
  the demo password, each with a quota of its own (several accounts side by side).

Shape (``--shape issue``, the default): a realistic summary as the live service sends it, ~14 KB: 37 statistics,
30 recent tournaments, each data set and the timeline cut to one point. ``--shape sandbox``
serves the sandbox's bodies as they are (~24 KB). ``--distinct N`` renders N players through the
sandbox; further players (``--players`` more than that) get a copy of player ``i mod N``'s
summary under their own name, network and country (rendering 20,000 through the sandbox would
take minutes; the client does the same work either way).

Control (no credentials): ``GET /_bench/stats`` (JSON counters), ``GET /_bench/reset`` (quota and
counters back to the start), ``GET /_bench/latency?ms=N`` (the latency from now on).

    python -m benchmarks.bench_server --port 0 --players 2000 --latency-ms 20
    # prints "listening http://127.0.0.1:PORT" on stdout once every body is rendered

Point ``tourneylake run`` at it with ``TOURNEYLAKE_BASE_URL=http://127.0.0.1:PORT``, the demo
account named (``TOURNEYLAKE_APPNAME``, ``…_APPKEY``, ``…_USERNAME``, ``…_PASSWORD``: a URL is
never given the sandbox's account by default) and ``--date`` the day before ``--today``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any
from urllib.parse import parse_qs, unquote, unquote_to_bytes

import httptools
import orjson

SEED = 7
TODAY = date(2026, 3, 2)
#: The searches-left slot in every rendered ``UserInfo``: replaced at serve time by the count.
SENTINEL = b"987654321"
TIME_OF_DAY = 12 * 3600

_JSON = b"application/json"
_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: "
_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\ncontent-length: 9\r\n\r\nNot Found"


# ---------------------------------------------------------------------------------------- render


@dataclass
class Bodies:
    """Every answer, pre-rendered. Templates are lists of byte pieces around the searches left."""

    appname: str
    metadata: bytes
    metadata_cached: bytes
    metadata_hash: bytes
    countries: list[bytes]
    news: list[bytes]
    errors: dict[int, list[bytes]]
    #: percent-decoded summary path → its template
    summaries: dict[bytes, list[bytes]] = field(default_factory=dict)
    filter_sent: str = ""
    username: bytes = b""
    password: bytes = b""
    render_s: float = 0.0
    sizes: list[int] = field(default_factory=list)


def _trim(body: bytes, shape: str) -> Any:
    doc = orjson.loads(body)
    if shape == "sandbox":
        return doc
    player = doc["Response"]["PlayerResponse"]["PlayerView"]["Player"]
    stats = player.get("Statistics") or {}
    if isinstance(stats.get("Statistic"), list):
        stats["Statistic"] = stats["Statistic"][:37]
    sets = stats.get("StatisticalDataSet")
    if isinstance(sets, list):
        for one in sets:
            if isinstance(one.get("Data"), list):
                one["Data"] = one["Data"][:1]
    timeline = stats.get("Timeline")
    if isinstance(timeline, dict) and isinstance(timeline.get("Event"), list):
        timeline["Event"] = timeline["Event"][:1]
    recent = player.get("RecentTournaments")
    if isinstance(recent, dict) and isinstance(recent.get("Tournament"), list):
        recent["Tournament"] = recent["Tournament"][:30]
    return doc


def _pieces(body: bytes) -> list[bytes]:
    return body.split(SENTINEL)


def render(seed: int, players: int, today: date, distinct: int, shape: str) -> tuple[Bodies, list[tuple[str, str]]]:
    """Every answer of the night before ``today`` for the first ``players`` of the sandbox world."""
    import httpx

    from tourneylake.api import encode_password
    from tourneylake.api.calls import segment
    from tourneylake.api.filters import filter_for_night
    from tourneylake.sandbox import DEMO, SandboxServer

    t0 = time.perf_counter()
    night = today - timedelta(days=1)
    filter_sent = filter_for_night("", night).sent
    password = encode_password(DEMO.password, DEMO.appkey)
    auth = {"Accept": "application/json", "User-Agent": "bench-render/1", "Username": DEMO.username, "Password": password}
    api = f"/api/{DEMO.appname}"
    server = SandboxServer(seed=seed, players=players, today=today, time_of_day=TIME_OF_DAY, demo_quota=10**9)
    with server, httpx.Client(base_url=server.base_url, headers=auth, timeout=120) as http:
        roster = server.world.roster(players)

        def get(path: str, **params: str) -> bytes:
            server.accounts.set_remaining(DEMO.username, int(SENTINEL))
            response = http.get(api + path, params=params)
            response.raise_for_status()
            return response.content

        metadata = get("/metadata")
        metadata_hash = orjson.loads(metadata)["Response"]["@metadataHash"]
        cached = get("/metadata", hash=metadata_hash)
        countries = get("/metadata/countries")
        news = get("/news/whatsnew")
        errors = {}
        errors[101001] = _pieces(
            http.get(api + "/networks/PokerStars/players/x/summary", headers={"Username": "nobody@x"}).content
        )
        errors[101002] = _pieces(http.get(api + "/networks/PokerStars/players/x/summary", headers={"Password": "0" * 32}).content)
        errors[101011] = _pieces(http.get(api + "/networks/PokerStars/players/x/summary", headers={"User-Agent": ""}).content)
        server.accounts.set_remaining(DEMO.username, int(SENTINEL))
        errors[200039] = _pieces(
            http.get(api + "/networks/PokerStars/players/nobody%20at%20all/summary", params={"filter": filter_sent}).content
        )
        docs = []
        for network, name in roster[:distinct]:
            body = get(f"/networks/{segment(network)}/players/{segment(name)}/summary", filter=filter_sent)
            docs.append(_trim(body, shape))
    bodies = Bodies(
        DEMO.appname,
        metadata,
        cached,
        metadata_hash.encode(),
        _pieces(countries),
        _pieces(news),
        errors,
        filter_sent=filter_sent,
        username=DEMO.username.encode(),
        password=password.encode(),
    )
    for i, (network, name) in enumerate(roster):
        doc = docs[i % len(docs)]
        if i >= len(docs):  # a copy of a rendered player's summary under this player's name
            view = doc["Response"]["PlayerResponse"]["PlayerView"]
            player = {**view["Player"], "@name": name, "@network": network}
            doc = {"Response": {**doc["Response"], "PlayerResponse": {"PlayerView": {**view, "Player": player}}}}
        body = orjson.dumps(doc)
        bodies.sizes.append(len(body))
        path = f"{api}/networks/{network}/players/{name}/summary".encode()
        bodies.summaries[path] = _pieces(body)
    bodies.render_s = time.perf_counter() - t0
    return bodies, roster


# ---------------------------------------------------------------------------------------- serve


def bench_username(index: int) -> str:
    """The user name of the ``--accounts`` account ``index`` (from 1)."""
    return f"bench{index}@example.com"


class State:
    def __init__(self, bodies: Bodies, quota: int, latency_ms: float, accounts: int = 0) -> None:
        self.bodies = bodies
        self.quota = quota
        self.users = {bodies.username, *(bench_username(i).encode() for i in range(1, accounts + 1))}
        self.latency = latency_ms / 1000
        self.prefix = f"/api/{bodies.appname}/".encode()
        self.reset()

    def reset(self) -> None:
        self.remaining_of = dict.fromkeys(self.users, self.quota)
        self.counts: dict[str, int] = {}
        self.filter_mismatches = 0
        self.first_at: float | None = None  # time.time() of the first request since the reset
        self.last_at: float | None = None

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def stats(self) -> bytes:
        sizes = self.bodies.sizes
        return orjson.dumps(
            {
                "counts": self.counts,
                "remaining": self.remaining_of[self.bodies.username],
                "remaining_by_user": {user.decode(): left for user, left in self.remaining_of.items()},
                "filter_mismatches": self.filter_mismatches,
                "first_at": self.first_at,
                "last_at": self.last_at,
                "latency_ms": self.latency * 1000,
                "summaries": len(sizes),
                "mean_summary_bytes": sum(sizes) / len(sizes) if sizes else 0,
                "render_s": self.bodies.render_s,
                "filter": self.bodies.filter_sent,
            }
        )


def _ok(body: bytes) -> bytes:
    return b"".join((_HEAD, str(len(body)).encode(), b"\r\n\r\n", body))


class Connection(asyncio.Protocol):
    def __init__(self, state: State, loop: asyncio.AbstractEventLoop) -> None:
        self.state = state
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            assert self.transport is not None
            self.transport.close()

    def on_message_begin(self) -> None:
        self.url = b""
        self.accept = self.agent = self.user = self.password = None

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"accept":
            self.accept = value
        elif name == b"user-agent":
            self.agent = value
        elif name == b"username":
            self.user = value
        elif name == b"password":
            self.password = value

    def on_message_complete(self) -> None:
        response = self.answer()
        keep = self.parser.should_keep_alive()
        delay = self.state.latency
        if delay > 0:
            self.loop.call_later(delay, self.write, response, keep)
        else:
            self.write(response, keep)

    def write(self, response: bytes, keep: bool) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.write(response)
        if not keep:
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def answer(self) -> bytes:
        state = self.state
        bodies = state.bodies
        path, _, query = self.url.partition(b"?")
        if path.startswith(b"/_bench/"):
            return self.control(path, query)
        state.last_at = now = time.time()
        if state.first_at is None:
            state.first_at = now
        if not path.startswith(state.prefix) or self.accept is None or _JSON not in self.accept:
            state.count("not_found")
            return _NOT_FOUND
        resource = path[len(state.prefix) :]
        if resource == b"metadata":
            state.count("metadata")
            if query and parse_qs(query.decode()).get("hash", [""])[0].encode() == bodies.metadata_hash:
                return _ok(bodies.metadata_cached)
            return _ok(bodies.metadata)
        template = None
        free = resource in (b"metadata/countries", b"news/whatsnew")
        if free:
            template = bodies.countries if resource == b"metadata/countries" else bodies.news
        else:
            template = bodies.summaries.get(path)
            if template is None:
                decoded = unquote_to_bytes(path)
                template = bodies.summaries.get(decoded)
                if template is None and not (resource.startswith(b"networks/") and resource.endswith(b"/summary")):
                    state.count("not_found")
                    return _NOT_FOUND
        left = state.remaining_of.get(self.user or b"", state.quota)
        remaining = str(left).encode()
        if not self.agent:
            state.count("error_101011")
            return _ok(remaining.join(bodies.errors[101011]))
        if self.user not in state.users:
            state.count("error_101001")
            return _ok(remaining.join(bodies.errors[101001]))
        if self.password != bodies.password:
            state.count("error_101002")
            return _ok(remaining.join(bodies.errors[101002]))
        if free:
            state.count(resource.decode())
            return _ok(remaining.join(template))
        state.remaining_of[self.user] = left - 1
        remaining = str(left - 1).encode()
        if template is None:
            state.count("error_200039")
            return _ok(remaining.join(bodies.errors[200039]))
        state.count("summary")
        if unquote(query.decode()).partition("filter=")[2].split("&")[0] != bodies.filter_sent:
            state.filter_mismatches += 1
        return _ok(remaining.join(template))

    def control(self, path: bytes, query: bytes) -> bytes:
        state = self.state
        if path == b"/_bench/reset":
            state.reset()
        elif path == b"/_bench/latency":
            state.latency = float(parse_qs(query.decode())["ms"][0]) / 1000
        elif path != b"/_bench/stats":
            return _NOT_FOUND
        return _ok(state.stats())


async def serve(state: State, host: str, port: int, ready: Any) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Connection(state, loop), host, port, backlog=1024, reuse_address=True)
    bound = server.sockets[0].getsockname()[1]
    ready(f"http://{host}:{bound}")
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def arguments(description: str) -> argparse.ArgumentParser:
    """The command line of a bench server (this one, :mod:`benchmarks.threaded_server`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--players", type=int, default=2000)
    parser.add_argument("--distinct", type=int, default=2000, help="players rendered through the sandbox; the rest are copies")
    parser.add_argument("--today", default=TODAY.isoformat(), help="the sandbox's day: the night served is the day before")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--quota", type=int, default=1_000_000)
    parser.add_argument("--shape", choices=["issue", "sandbox"], default="issue")
    parser.add_argument("--accounts", type=int, default=0, help="accounts bench1@example.com … besides the demo's")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__.split("\n\n")[0]).parse_args(argv)
    bodies, _ = render(args.seed, args.players, date.fromisoformat(args.today), min(args.distinct, args.players), args.shape)
    state = State(bodies, args.quota, args.latency_ms, args.accounts)
    gc.collect()
    gc.freeze()  # the rendered bodies never change: keep the collector off them

    def ready(url: str) -> None:
        sizes = bodies.sizes
        print(
            f"listening {url} ({len(sizes)} summaries, mean {sum(sizes) / max(1, len(sizes)) / 1000:.1f} KB, "
            f"rendered in {bodies.render_s:.1f} s)",
            flush=True,
        )

    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    runner(serve(state, args.host, args.port, ready))
    return 0


if __name__ == "__main__":
    sys.exit(main())
