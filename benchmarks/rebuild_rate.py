"""The rebuild's own rate, in a fresh process (run by :mod:`benchmarks.run`, benchmark 6): one
night's tables made again from its raw answers (:func:`tourneylake.tables.night_tables.rebuild_night`: read,
parse, normalise, Parquet), timed alone — no interpreter start, no imports, no warehouse load —
so its summaries per CPU-second are the per-core throughput the issue asks about. Then each of
its steps alone over the same answers (reading and gunzipping the files, parsing, normalising,
writing Parquet), CPU microseconds per summary: what bounds the rate. Prints one JSON line.

    python -m benchmarks.rebuild_rate --data-dir /tmp/x/d --night 2026-03-02
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from typing import Any

import orjson


def _cpu_us(fn: Callable[[], Any], count: int) -> tuple[float, Any]:
    """``fn()``'s CPU time in microseconds per summary, and what it returned; the cyclic
    collector paused, as the rebuild pauses it while reading answers."""
    gc.collect()
    gc.disable()
    try:
        c0 = time.process_time()
        out = fn()
        return (time.process_time() - c0) / count * 1e6, out
    finally:
        gc.enable()


def steps(lake: Any, night: date) -> dict[str, float]:
    """CPU microseconds per summary of each step of the rebuild, alone, in its order."""
    from tourneylake.api import calls
    from tourneylake.api.answers import read_answer
    from tourneylake.lake.lake import Lake
    from tourneylake.tables.night_tables import summary_labels
    from tourneylake.tables.normalize.summary import SummaryNormalizer
    from tourneylake.tables.reference import InForce

    n = len(lake.raw.refs(night, calls.PLAYER_SUMMARY))
    out: dict[str, float] = {}
    out["read_us"], raws = _cpu_us(lambda: list(lake.raw.bodies(night, calls.PLAYER_SUMMARY)), n)

    def parse() -> None:  # each tree dropped before the next, as in the rebuild
        for raw in raws:
            read_answer(raw.body, raw.fmt, raw.resource)

    out["parse_us"], _ = _cpu_us(parse, n)
    roots = [read_answer(r.body, r.fmt, r.resource)[0] for r in raws]
    in_force = InForce(lake, night)

    def normalise() -> list[dict[str, Any]]:
        normalizer = SummaryNormalizer(
            night, in_force.rates, in_force.statistic_types, in_force.series_types, in_force.axis_types
        )
        batches = []
        for i, (raw, root) in enumerate(zip(raws, roots, strict=True)):
            normalizer.add(root, fetched_at=raw.fetched_at, **summary_labels(raw.key))
            if (i + 1) % 500 == 0:
                batches.append(normalizer.flush())
        batches.append(normalizer.flush())
        return batches

    out["normalise_us"], batches = _cpu_us(normalise, n)
    with tempfile.TemporaryDirectory(prefix="tourneylake-rebuild-steps-") as tmp:
        scratch = Lake(tmp)

        def write() -> None:
            for name in batches[0]:
                with scratch.tables.writer(name, night) as writer:
                    for batch in batches:
                        if batch[name].num_rows:
                            writer.write(batch[name])

        out["write_us"], _ = _cpu_us(write, n)
    return {k: round(v, 1) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--night", required=True, type=date.fromisoformat)
    args = parser.parse_args(argv)

    from tourneylake.api import calls
    from tourneylake.lake.lake import Lake
    from tourneylake.runtime.without_pandas import skip_pandas_sniffing
    from tourneylake.tables.night_tables import rebuild_night

    skip_pandas_sniffing()  # as `tourneylake rebuild` does
    lake = Lake(args.data_dir)
    summaries = len(lake.raw.refs(args.night, calls.PLAYER_SUMMARY))
    wall, cpu = time.perf_counter(), time.process_time()
    rows = rebuild_night(lake, args.night)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    figures = {"summaries": summaries, "seconds": wall, "cpu_s": cpu, "rows": sum(rows.values())}
    figures["steps_cpu_us_per_summary"] = steps(lake, args.night)
    sys.stdout.write(orjson.dumps(figures).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
