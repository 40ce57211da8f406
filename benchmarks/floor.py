"""The floor of benchmark 2 on this machine, in a fresh process (run by :mod:`benchmarks.run`):
the same summaries fetched from the bench server by a bare client — one aiohttp session,
``--concurrency`` requests in flight, each body read and dropped: no ledger, no save, no parse.
What it takes beyond latency x calls / concurrency is the host's own share (the server's
timers, loopback, waking idle cores), which no client can go below. Prints one JSON line.

    python -m benchmarks.floor --base-url http://127.0.0.1:PORT --players 200
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import aiohttp
import orjson

from benchmarks.common import CONCURRENCY, headers, roster, summary_path


async def fetch_all(base_url: str, paths: list[str], concurrency: int) -> float:
    """Seconds to fetch every path, ``concurrency`` at a time; every answer must be a summary."""
    sent = headers()
    waiting = list(reversed(paths))
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency), timeout=timeout) as session:

        async def lane() -> None:
            while waiting:
                async with session.get(base_url + waiting.pop(), headers=sent) as response:
                    body = await response.read()
                    if response.status != 200 or b"PlayerResponse" not in body:  # an error answer is no summary
                        raise RuntimeError(f"not a summary: HTTP {response.status}, {body[:200]!r}")

        t0 = time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(concurrency)))
        return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--players", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    args = parser.parse_args(argv)

    paths = [summary_path(network, player) for network, player in roster(args.players)]
    seconds = asyncio.run(fetch_all(args.base_url, paths, args.concurrency))
    sys.stdout.write(orjson.dumps({"seconds": seconds, "calls": len(paths)}).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
