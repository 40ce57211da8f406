"""``tourneylake run`` against dlt at the same number of parallel sessions, on two servers.

The service polices sessions per account, so both tools get the same number: ours
``TOURNEYLAKE_CONCURRENCY=sessions``, dlt's ``rest_api`` ``sessions`` extract workers (one
connection each). Two servers, both in their own process with the same answers:
:mod:`benchmarks.bench_server` (near-zero cost per request: what is measured is the client's own
cost) and :mod:`benchmarks.threaded_server` (a plain threaded Python server: what a fixed cost
per night and per request does). Each round runs ours and dlt (dlt first in odd rounds) on one
server, then on the other (whole processes: wall, CPU, peak RSS of the process tree, and the
server's CPU), then a bare client (:mod:`benchmarks.floor`, the same calls, bodies dropped): the
server's own floor, beside the ideal ``players x latency / sessions``. Medians and each round's
dlt/ours ratio: one JSON line and a markdown table on stdout; ``--record`` appends the table to
RESULTS.md.

    python -m benchmarks.sessions --players 2000 --sessions 16 --repeats 3 --latency-ms 20
"""

from __future__ import annotations

import argparse
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import psutil

import benchmarks.run as bench_run
from benchmarks.common import ROOT, BenchServer, roster, scratch, write_watchlist
from benchmarks.run import RESULTS, Arm, child, dlt_run, log, machine, whole_run
from benchmarks.threaded_server import ThreadedBenchServer

TIMEOUT = 900.0


def server_cpu_s(server: BenchServer) -> float:
    assert server.proc is not None
    times = psutil.Process(server.proc.pid).cpu_times()
    return times.user + times.system


def one_round(server: BenchServer, players: int, sessions: int, watchlist: Path, tmp: Path, rep: int) -> dict[str, Any]:
    """Ours and dlt (dlt first in odd rounds), then the bare client, each against ``server``; the
    server's CPU during each."""
    arms = {"ours": Arm("ours", ROOT, {"TOURNEYLAKE_CONCURRENCY": str(sessions)})}
    tools = ("ours", "dlt") if rep % 2 == 0 else ("dlt", "ours")
    runs: dict[str, Any] = {}
    for tool in (*tools, "floor"):
        cpu0 = server_cpu_s(server)
        if tool in arms:
            run = whole_run(server, arms[tool], watchlist, tmp / f"{tool}-{rep}", TIMEOUT)
            if run["summaries"] != players:
                raise RuntimeError(f"{tool} fetched {run['summaries']} of {players}")
        elif tool == "dlt":
            with scratch() as work:
                run = dlt_run(server, players, work, TIMEOUT)
        else:
            server.reset()
            args = ["--base-url", server.base_url, "--players", str(players), "--concurrency", str(sessions)]
            run = child("benchmarks.floor", args, TIMEOUT)
        run["server_cpu_s"] = server_cpu_s(server) - cpu0
        runs[tool] = {k: v for k, v in run.items() if k in KEPT}
    return runs


KEPT = ("seconds", "cpu_s", "peak_rss_mb", "server_cpu_s", "host_steal_pct", "startup_s", "after_last_request_s")


def summarise(name: str, rounds: list[dict[str, Any]], players: int, sessions: int, latency_ms: float) -> dict[str, Any]:
    def med(tool: str, key: str) -> float | None:
        values = [r[tool][key] for r in rounds if r[tool].get(key) is not None]
        return round(statistics.median(values), 3) if values else None

    ratios = [round(r["dlt"]["seconds"] / r["ours"]["seconds"], 3) for r in rounds]
    return {
        "server": name,
        "ideal_s": round(players * latency_ms / 1000 / sessions, 3),
        "medians": {tool: {key: med(tool, key) for key in KEPT if key in rounds[0][tool]} for tool in rounds[0]},
        "round_ratios_dlt_over_ours": ratios,
        "median_ratio": statistics.median(ratios),
        "rounds": rounds,
    }


def table(results: list[dict[str, Any]], players: int, sessions: int, latency_ms: float, repeats: int) -> str:
    lines = [
        f"{players} players, {sessions} sessions each, {latency_ms:g} ms, medians of {repeats} alternating rounds "
        "(whole processes; server CPU: the server process's, during that run)",
        "",
        "| server | ideal | bare client | ours: wall / CPU / peak RSS / server CPU | dlt: wall / CPU / peak RSS / server CPU "
        "| dlt / ours (rounds) |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        cells = [
            f"{x['seconds']:.2f} s / {x['cpu_s']:.1f} s / {x['peak_rss_mb']:.0f} MB / {x['server_cpu_s']:.2f} s"
            for x in (r["medians"]["ours"], r["medians"]["dlt"])
        ]
        rounds = ", ".join(f"{x:.2f}" for x in r["round_ratios_dlt_over_ours"])
        lines.append(
            f"| {r['server']} | {r['ideal_s']:.2f} s | {r['medians']['floor']['seconds']:.2f} s | {cells[0]} | {cells[1]} "
            f"| **{r['median_ratio']:.2f}x** ({rounds}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=2000)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--record", action="store_true", help="append the table to benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    bench_run.DLT_WORKERS = args.sessions  # dlt_run's worker count (a module setting of run.py)
    servers = {"bench_server": BenchServer, "threaded_server": ThreadedBenchServer}
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
    with scratch() as tmp:
        watchlist = write_watchlist(tmp / "watchlist.yaml", roster(args.players))
        started = {name: cls(args.players, args.latency_ms).start() for name, cls in servers.items()}
        try:
            for rep in range(args.repeats):
                for name, server in started.items():
                    runs = one_round(server, args.players, args.sessions, watchlist, tmp / name, rep)
                    rounds[name].append(runs)
                    log(f"[{name} round {rep + 1}] " + "; ".join(f"{t} {r['seconds']:.2f} s" for t, r in runs.items()))
        finally:
            for server in started.values():
                server.stop()
    results = [summarise(name, r, args.players, args.sessions, args.latency_ms) for name, r in rounds.items()]
    text = table(results, args.players, args.sessions, args.latency_ms, args.repeats)
    print(orjson.dumps({"players": args.players, "sessions": args.sessions, "latency_ms": args.latency_ms,
                        "results": results}).decode())  # fmt: skip
    print(text)
    if args.record:
        info = machine()
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        head = f"## Same sessions as dlt, two servers (`benchmarks/sessions.py`), {stamp}\n\n"
        head += f"- Machine: {info['cpu']}, {info['cores']} cores, {info['ram']} RAM; {info['os']}\n"
        head += f"- Python {info['python']}; {info['packages']}\n\n"
        with RESULTS.open("a", encoding="utf-8") as handle:
            handle.write("\n" + head + text + "\n")
        log(f"appended to {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
