"""Accounts side by side (issue 33): one night of several accounts through ``tourneylake run``,
one account after another in one process (``TOURNEYLAKE_ACCOUNT_WORKERS=1``: the in-process
executor, as before) against side by side (``0``: each account's harvest in a process of its
own, the multiprocess executor), alternating A/B, medians of ``--repeats``.

The service is :mod:`benchmarks.bench_server` with ``--accounts`` (each account its own quota),
its latency a timer: the figure of record is 4 accounts x 2,500 players at 150 ms, 4 calls in
flight per account (the service polices sessions per account, so accounts are what run side
by side). Every run starts from an empty lake (everything is fetched) and a reset server.

    python -m benchmarks.shards                                    # the figure of record (~10 min)
    python -m benchmarks.shards --players-per-account 25 --latency-ms 20 --repeats 1 --no-write   # a quick check

Appends to ``benchmarks/RESULTS.md`` (unless ``--no-write``), with the machine and the date.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path

import orjson

from benchmarks.bench_server import bench_username
from benchmarks.common import NIGHT, ROOT, BenchServer, measure, roster, run_env, scratch, tourneylake_exe
from tourneylake.sandbox import DEMO

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
MODES = {"one after another": "1", "side by side": "0"}
QUOTA = 1_000_000  # the bench server's default, per account


def write_watchlist(path: Path, accounts: int, players: list[tuple[str, str]]) -> Path:
    lines = ["accounts:"]
    for i in range(1, accounts + 1):
        lines.append(f"  - {{name: bench{i}, username: {bench_username(i)}, password_env: TL_BENCH{i}_PW}}")
    lines.append("players:")
    for network, name in players:
        lines.append(f"  - {{network: {orjson.dumps(network).decode()}, name: {orjson.dumps(name).decode()}}}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--accounts", type=int, default=4)
    parser.add_argument("--players-per-account", type=int, default=2500)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only; RESULTS.md untouched")
    args = parser.parse_args(argv)
    players = args.accounts * args.players_per_account
    passwords = {f"TL_BENCH{i}_PW": DEMO.password for i in range(1, args.accounts + 1)}
    seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
    with BenchServer(players, args.latency_ms, distinct=min(players, 500), accounts=args.accounts) as server, scratch() as work:
        watchlist = write_watchlist(work / "watchlist.yaml", args.accounts, roster(players))
        for round_ in range(args.repeats):
            for mode, workers in MODES.items():  # alternating: A, B, A, B…
                server.reset()
                folder = work / f"{round_}-{workers}"
                env = run_env(
                    server.base_url, folder / "data", watchlist, folder / "dagster_home", args.concurrency,
                    TOURNEYLAKE_ACCOUNT_WORKERS=workers, **passwords,
                )  # fmt: skip
                run = measure([*tourneylake_exe(), "run", "--date", NIGHT.isoformat()], env=env, timeout=3600)
                fetched = sum(n for user, n in _spent(server, args.accounts).items())
                if run.returncode != 0 or fetched != players:
                    print(run.stderr[-3000:], file=sys.stderr)
                    raise SystemExit(f"{mode}: exit {run.returncode}, {fetched} of {players} summaries fetched")
                seconds[mode].append(run.seconds)
                print(f"round {round_ + 1}, {mode}: {run.seconds:.1f} s (CPU {run.user_s + run.sys_s:.1f} s)", flush=True)
    a, b = (statistics.median(seconds[mode]) for mode in MODES)
    line = (
        f"| accounts side by side: {args.accounts} accounts x {args.players_per_account:,} players, {args.latency_ms:g} ms, "
        f"concurrency {args.concurrency} per account | one after another {a:.1f} s, side by side {b:.1f} s: **{a / b:.2f}x** "
        f"(medians of {args.repeats}, alternating) | >= 3x | {'yes' if a / b >= 3 else '**no**'} |"
    )
    print(line)
    if not args.no_write:
        host = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
        with RESULTS.open("a", encoding="utf-8") as out:
            out.write(f"\n## Accounts side by side ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {host})\n\n")
            out.write("| benchmark | figure | target | holds |\n|---|---|---|---|\n" + line + "\n")
    return 0


def _spent(server: BenchServer, accounts: int) -> dict[str, int]:
    """Searches each bench account spent since the last reset."""
    stats = server.stats()
    quota = QUOTA
    users = {bench_username(i) for i in range(1, accounts + 1)}
    return {user: quota - left for user, left in stats["remaining_by_user"].items() if user in users}


if __name__ == "__main__":
    sys.exit(main())
