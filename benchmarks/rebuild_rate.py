"""The rebuild's own rate, in a fresh process (run by :mod:`benchmarks.run`, benchmark 6): one
night's tables made again from its raw answers (:func:`tourneylake.rebuild.rebuild_night`: read,
parse, normalise, Parquet), timed alone — no interpreter start, no imports, no warehouse load —
so its summaries per CPU-second are the per-core throughput the issue asks about. Prints one
JSON line.

    python -m benchmarks.rebuild_rate --data-dir /tmp/x/d --night 2026-03-02
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import date

import orjson


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--night", required=True, type=date.fromisoformat)
    args = parser.parse_args(argv)

    import pyarrow as pa

    from tourneylake.api import calls
    from tourneylake.lake import Lake
    from tourneylake.rebuild import rebuild_night

    pa.array(["warm"])  # pyarrow's one-off pandas import is start-up, not rebuilding
    lake = Lake(args.data_dir)
    summaries = len(lake.raw_paths(args.night, calls.PLAYER_SUMMARY))
    wall, cpu = time.perf_counter(), time.process_time()
    rows = rebuild_night(lake, args.night)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    sys.stdout.write(
        orjson.dumps({"summaries": summaries, "seconds": wall, "cpu_s": cpu, "rows": sum(rows.values())}).decode() + "\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
