"""A loopback proxy in front of an S3 endpoint (moto in the tests and benchmarks) that counts
what goes through it and, when asked, fails a share of the requests as a real store does.

``python -m tests.s3_proxy --target URL [--faults 0.1] [--max-faults N] [--seed S] [--lifetime-s T]``
prints ``listening http://127.0.0.1:PORT`` and serves until stopped (by its pid) or its
lifetime ends. Every fault is bounded: a share of the requests (``--faults``), at most
``--max-faults`` in all, never two in a row for one path (a client's bounded retries must be
able to get through), and only while the proxy lives. The faults, one drawn per faulty request:

- ``5xx``: HTTP 500 ``InternalError`` before the store sees the request;
- ``slowdown``: HTTP 503 ``SlowDown`` before the store sees it;
- ``drop``: the connection closed without an answer, half of the time after the store carried
  the request out (a write that happened, whose answer was lost);
- ``truncate``: the store's answer sent with its full ``Content-Length`` but cut half-way.

``GET /_proxy/stats`` (never forwarded) answers the counts as JSON: requests by method, LIST
requests, conditional PUTs (``If-None-Match``), faults by kind. ``POST /_proxy/reset`` zeroes them.
``POST /_proxy/outage?seconds=S`` starts an outage: for the next ``S`` seconds no request reaches
the store, each answered by turns with a ``503 ServiceUnavailable`` (a store throttling or
restarting) or a dropped connection (a store that is down), as a restart of an object store or a
throttling burst looks to a client; the counts say how many (``outage``).
``--log FILE`` appends a line per request (time, method, path or listed prefix, status, seconds), to
see which step asks what.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization", "proxy-authenticate"}
_KINDS = ("5xx", "slowdown", "drop", "truncate")
#: What a request is about, for the counts (the lake's areas).
_AREAS = ("_delta_log", "_raw", "_ledger", "_state", "_source.json", ".parquet", "snapshot_date=")
_ERROR = b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s</Message></Error>'


class Proxy:
    def __init__(self, target: str, share: float, max_faults: int, seed: int, log: str | None = None) -> None:
        self.target = target.rstrip("/")
        self.log = open(log, "a", buffering=1) if log else None  # noqa: SIM115 - open while the proxy lives
        self.share = share
        self.max_faults = max_faults
        self.random = random.Random(seed)
        self.counts: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()
        self.last_faulty: set[str] = set()  # paths whose previous request failed: the next one passes
        self.outage_until = 0.0  # time.monotonic() until which every request fails (an outage)
        self.session: aiohttp.ClientSession | None = None

    def stats(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "faults": dict(self.faults)}

    def _fault(self, path: str) -> str | None:
        if path in self.last_faulty:
            self.last_faulty.discard(path)
            return None
        if sum(self.faults.values()) >= self.max_faults or self.random.random() >= self.share:
            return None
        self.last_faulty.add(path)
        return self.random.choice(_KINDS)

    def _count(self, request: web.Request) -> None:
        self.counts["requests"] += 1
        self.counts[request.method] += 1
        query = request.rel_url.query
        listing = request.method == "GET" and ("list-type" in query or "prefix" in query or "delimiter" in query)
        if listing:
            self.counts["LIST"] += 1
        where = str(query.get("prefix", "")) if listing else request.path
        area = next((a for a in _AREAS if a in where), "other")
        self.counts[f"{'LIST' if listing else request.method} {area}"] += 1
        if request.method == "PUT" and "If-None-Match" in request.headers:
            self.counts["conditional PUT"] += 1
        if request.method == "POST" and "uploadId" in query and "If-None-Match" in request.headers:
            self.counts["conditional complete"] += 1

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/_proxy/stats":
            return web.json_response(self.stats())
        if request.path == "/_proxy/reset":
            self.counts.clear()
            self.faults.clear()
            return web.json_response({})
        if request.path == "/_proxy/outage":
            self.outage_until = time.monotonic() + float(request.rel_url.query["seconds"])
            return web.json_response({})
        self._count(request)
        started = time.time()
        answer = await self._forward(request)
        if self.log is not None:
            query = request.rel_url.query
            what = f"?prefix={query.get('prefix', '')}" if "prefix" in query or "list-type" in query else ""
            self.log.write(f"{started:.4f} {request.method} {request.path}{what} {answer.status} {time.time() - started:.4f}\n")
        return answer

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        if time.monotonic() < self.outage_until:
            self.faults["outage"] += 1
            if self.faults["outage"] % 2:
                return web.Response(status=503, body=_ERROR % (b"ServiceUnavailable", b"outage"), content_type="application/xml")
            await request.read()
            return _drop(request)
        fault = self._fault(request.path)
        if fault is not None:
            self.faults[fault] += 1
        if fault == "5xx":
            return web.Response(status=500, body=_ERROR % (b"InternalError", b"injected"), content_type="application/xml")
        if fault == "slowdown":
            return web.Response(
                status=503, body=_ERROR % (b"SlowDown", b"Please reduce your request rate."), content_type="application/xml"
            )
        body = await request.read()
        if fault == "drop" and self.random.random() < 0.5:
            return _drop(request)
        assert self.session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP and k.lower() != "content-length"}
        async with self.session.request(
            request.method, self.target + str(request.rel_url), headers=headers, data=body, allow_redirects=False
        ) as answer:
            content = await answer.read()
            status, answer_headers = answer.status, answer.headers
        if fault == "drop":
            return _drop(request)
        out_headers = {k: v for k, v in answer_headers.items() if k.lower() not in _HOP and k.lower() != "content-length"}
        if request.method == "HEAD":  # no body, but the object's length
            response = web.StreamResponse(status=status, headers=out_headers)
            if "Content-Length" in answer_headers:
                response.content_length = int(answer_headers["Content-Length"])
            await response.prepare(request)
            await response.write_eof()
            return response
        if fault == "truncate" and len(content) > 1:
            response = web.StreamResponse(status=status, headers=out_headers)
            response.content_length = len(content)
            await response.prepare(request)
            await response.write(content[: len(content) // 2])
            return _drop(request)
        return web.Response(status=status, body=content, headers=out_headers)


def _drop(request: web.Request) -> web.StreamResponse:
    """Close the client's connection with no (or no more) answer."""
    transport = request.transport
    if transport is not None:
        transport.abort()
    raise asyncio.CancelledError  # aiohttp ends the handler quietly


async def serve(args: argparse.Namespace) -> None:
    proxy = Proxy(args.target, args.faults, args.max_faults, args.seed, args.log)
    proxy.session = aiohttp.ClientSession(auto_decompress=False, timeout=aiohttp.ClientTimeout(total=60))
    app = web.Application(client_max_size=1 << 30)
    app.router.add_route("*", "/{tail:.*}", proxy.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", args.port))
    site = web.SockSite(runner, sock)
    await site.start()
    print(f"listening http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    try:
        await asyncio.sleep(args.lifetime_s)
    finally:
        await proxy.session.close()
        await runner.cleanup()


# ---------------------------------------------------------------------- started from a test or benchmark
def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a server this module started, by its pid: SIGTERM, then SIGKILL."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


def wait_listening(process: subprocess.Popen[Any], port: int, name: str, within_s: float = 30) -> None:
    """Return once ``process`` accepts connections on ``port`` (loopback); raise if it exits or
    ``within_s`` passes first."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not come up within {within_s:.0f} s") from None
            time.sleep(0.1)


@contextlib.contextmanager
def running_moto() -> Iterator[str]:
    """``moto_server`` (a real S3 API) on a loopback port; yields its endpoint URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    command = [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(process, port, "moto_server")
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(process)


class RunningProxy:
    """This proxy in a child process: its URL, its counts, and a reset."""

    def __init__(self, url: str) -> None:
        self.url = url

    def stats(self) -> dict[str, Any]:
        import urllib.request

        with urllib.request.urlopen(f"{self.url}/_proxy/stats", timeout=10) as answer:
            return dict(orjson.loads(answer.read()))

    def reset(self) -> None:
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"{self.url}/_proxy/reset", method="POST"), timeout=10).close()

    def outage(self, seconds: float) -> None:
        """No request reaches the store for the next ``seconds`` (see the module docstring)."""
        import urllib.request

        request = urllib.request.Request(f"{self.url}/_proxy/outage?seconds={seconds}", method="POST")
        urllib.request.urlopen(request, timeout=10).close()


@contextlib.contextmanager
def running_proxy(
    target: str, *, faults: float = 0.0, max_faults: int = 1000, seed: int = 1, lifetime_s: float = 900, log: str | None = None
) -> Iterator[RunningProxy]:
    """The proxy in front of ``target`` in a child process, stopped by its pid at the end."""
    command = [sys.executable, "-m", "tests.s3_proxy", "--target", target, "--faults", str(faults)]
    command += ["--max-faults", str(max_faults), "--seed", str(seed), "--lifetime-s", str(lifetime_s)]
    command += ["--log", log] if log else []
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=root)
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        if not line.startswith("listening "):
            raise RuntimeError(f"the S3 proxy did not start (exit {process.poll()})")
        yield RunningProxy(line.split()[1])
    finally:
        _stop(process)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--faults", type=float, default=0.0, help="share of requests that fail (0 to 1)")
    parser.add_argument("--max-faults", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lifetime-s", type=float, default=3600.0)
    parser.add_argument("--log", help="a file to append one line per request to")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
