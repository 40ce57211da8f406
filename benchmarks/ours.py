"""One timed harvest of ours, in a fresh process (run by :mod:`benchmarks.run`).

Fetches tonight's metadata first (untimed: dlt does not need it), then times
:func:`tourneylake.night.harvest.harvest_players` over ``--players`` sandbox players: fetch with the
async client, every body written raw to the lake before it is parsed, normalise, Parquet parts,
ledger. Prints one JSON line with the seconds, the rows per table and the process's memory:
``rss_before_mb`` (after imports and metadata) and ``peak_rss_mb`` (``VmHWM``: the high-water
mark of the whole process, so one harvest per process).

    python -m benchmarks.ours --base-url http://127.0.0.1:PORT --players 2000 --data-dir /tmp/x
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from pathlib import Path

import orjson


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[1])
        import os

        return pages * os.sysconf("SC_PAGE_SIZE") / 1e6
    except OSError:
        return float("nan")


def _peak_rss_mb() -> float:
    """This process's RSS high-water mark (``VmHWM``). Not ``ru_maxrss``: Linux carries that
    over from the parent across fork + exec, so a child would report the parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--players", type=int, required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--format", default="json", choices=["json", "xml"])
    args = parser.parse_args(argv)

    from benchmarks.common import prepare_night, roster, watchlist_for
    from tourneylake.night.harvest import harvest_players

    players = roster(args.players)
    night = prepare_night(args.base_url, Path(args.data_dir), args.concurrency, args.format)
    watchlist = watchlist_for(players)
    gc.collect()
    rss_before = _rss_mb()
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    outcome = harvest_players(night, watchlist)
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    peak = _peak_rss_mb()
    result = {
        "tool": "tourneylake",
        "seconds": seconds,
        "cpu_s": cpu,
        "fetched": outcome.fetched,
        "failed": len(outcome.failed),
        "rows": sum(outcome.rows.values()),
        "rows_by_table": outcome.rows,
        "searches_spent": outcome.searches_spent,
        "rss_before_mb": rss_before,
        "peak_rss_mb": peak,
    }
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0 if outcome.fetched == len(players) and not outcome.failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
