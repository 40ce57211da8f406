"""Fuzz every reader of response bodies with 100,000 cases or more, and count what escapes.

The cases are those of ``tests/test_fuzz.py`` (:mod:`tests.fuzz.cases`): case ``i`` is drawn
from ``Random(f"{seed}:{i}")``, so a run is reproducible and any case can be made again alone
(``make_case(Random(f"{seed}:{i}"))``). Each case (one body) goes through every entry point;
the summaries are normalised in batches, as the harvest does. A worker process per core; the
run stops at ``--cases`` or after ``--seconds``, whichever comes first.

Prints, per entry point, the calls made and the *unhandled* outcomes (goal: 0): an exception
other than ``MalformedPayload`` (any at all from ``SummaryNormalizer.flush`` and
``service_error``), a failed ``add`` that changed the batch, a table that cannot be read back,
an error message long enough to quote the body, the secret file's content anywhere. Then the
cases per second, and one JSON line with the figures.

    python -m benchmarks.fuzz --cases 100000
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from random import Random

import orjson

from tests.fuzz.cases import ENTRY_POINTS, Failure, Harness, make_case

_harness: Harness | None = None
_secret: Path | None = None
_seed = ""


def _start_worker(secret: Path, seed: str) -> None:
    global _harness, _secret, _seed
    # Out-of-range values are logged per flush: thousands of lines, none of them news here.
    logging.disable(logging.WARNING)
    _harness, _secret, _seed = Harness(secret), secret, seed


def _run_chunk(bounds: tuple[int, int]) -> tuple[int, dict[str, int], list[tuple[int, Failure]]]:
    """Cases ``start`` to ``stop`` as one batch: (cases, calls per entry point, failures)."""
    assert _harness is not None
    start, stop = bounds
    before = dict(_harness.calls)
    cases = [make_case(Random(f"{_seed}:{i}"), secret=_secret) for i in range(start, stop)]
    failures = _harness.run(cases)
    calls = {entry: _harness.calls[entry] - before[entry] for entry in ENTRY_POINTS}
    return stop - start, calls, [(start, f) for f in failures]


def _chunks(cases: int, batch: int, deadline: float) -> Iterator[tuple[int, int]]:
    for start in range(0, cases, batch):
        if time.monotonic() > deadline:
            return
        yield start, min(start + batch, cases)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=3600.0, help="stop after this long (default: an hour)")
    parser.add_argument("--seed", default="tourneylake-fuzz")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--batch", type=int, default=50, help="cases per batch of summaries (one flush)")
    parser.add_argument("--examples", type=int, default=3, help="failures to print per entry point")
    args = parser.parse_args(argv)

    calls: Counter[str] = Counter()
    unhandled: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    done = 0
    with tempfile.TemporaryDirectory() as tmp:
        secret = Path(tmp) / "secret.txt"
        secret.write_text("tourneylake-fuzz-secret-" + os.urandom(8).hex())
        t0 = time.perf_counter()
        deadline = time.monotonic() + args.seconds
        # fork would share the parent's imports; spawn keeps each worker's state its own.
        context = multiprocessing.get_context("spawn")
        with context.Pool(args.workers, initializer=_start_worker, initargs=(secret, args.seed)) as pool:
            for count, chunk_calls, failures in pool.imap_unordered(_run_chunk, _chunks(args.cases, args.batch, deadline)):
                done += count
                calls.update(chunk_calls)
                for start, failure in failures:
                    unhandled[failure.entry] += 1
                    shown = examples.setdefault(failure.entry, [])
                    if len(shown) < args.examples:
                        shown.append(f"batch from case {start}: {failure}")
        seconds = time.perf_counter() - t0

    width = max(map(len, ENTRY_POINTS))
    print(f"{done} cases (seed {args.seed!r}, {args.workers} workers) in {seconds:.1f} s: {done / seconds:.0f} cases/s")
    print(f"{'entry point':<{width}}  {'calls':>9}  unhandled")
    for entry in ENTRY_POINTS:
        print(f"{entry:<{width}}  {calls[entry]:>9}  {unhandled[entry]}")
    for entry, shown in examples.items():
        print(f"\n{entry}:")
        for line in shown:
            print("  " + line.replace("\n", "\n    "))
    figures = {
        "cases": done,
        "seconds": round(seconds, 1),
        "cases_per_s": round(done / seconds, 1),
        "workers": args.workers,
        "seed": args.seed,
        "calls": dict(calls),
        "unhandled": {entry: unhandled[entry] for entry in ENTRY_POINTS},
    }
    print(orjson.dumps(figures).decode())
    return 1 if sum(unhandled.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
