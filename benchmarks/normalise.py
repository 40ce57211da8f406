"""The summary normaliser alone: speed against orjson's parse, and peak RSS as a night grows.

``python -m benchmarks.normalise speed [--players 500] [--rounds 9] [--baseline FILE]``
    Sandbox summaries (fetched once from a sandbox process) and the recorded summary x50:
    ``tree.parse`` alone (orjson), parse + normalise (add + flush) on the fast path, on the tree
    path (``fast=False``), and, with ``--baseline``, with another ``summary.py`` (e.g. the last
    commit's: ``git show HEAD:tourneylake/tables/normalize/summary.py > /tmp/old_summary.py``). The
    variants alternate within each round; medians are reported.

``python -m benchmarks.normalise rss [--players 2000,20000] [--baseline FILE]``
    Peak RSS of a synthetic night (each size in a fresh child process): sandbox summaries
    recycled, each with its own player name and, every 500 players, new tournament ids (the
    worst case for the dedup keys: nothing shared), flushed every 500 summaries as the harvest
    does, the tables dropped.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, TODAY, sandbox_bodies

RECORDED = ROOT / "tests" / "data" / "recorded" / "player-summary.json"
BATCH = 500


def _normalizer_class(baseline: str | None) -> Any:
    if baseline is None:
        from tourneylake.tables.normalize.summary import SummaryNormalizer

        return SummaryNormalizer
    spec = importlib.util.spec_from_file_location("baseline_summary", baseline)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.SummaryNormalizer


def fetch(players: int, path: Path) -> None:
    """Sandbox summaries and tonight's metadata types, pickled to ``path``."""
    bodies, in_force = sandbox_bodies(players)
    meta = (in_force.rates, in_force.statistic_types, in_force.series_types, in_force.axis_types)
    path.write_bytes(pickle.dumps({"bodies": bodies, "meta": meta}))


def _speed(data: dict[str, Any], rounds: int, baseline: str | None) -> dict[str, Any]:
    from tourneylake.api.tree import parse

    rates, stat_types, set_types, axis = data["meta"]
    ours = _normalizer_class(None)
    variants: dict[str, Callable[[list[tuple[str, str, bytes]]], None]] = {}

    def parse_only(bodies: list[tuple[str, str, bytes]]) -> None:
        for _, _, body in bodies:
            parse(body, "json")

    def normalise_with(cls: Any, **kw: Any) -> Callable[[list[tuple[str, str, bytes]]], None]:
        def run(bodies: list[tuple[str, str, bytes]]) -> None:
            normalizer = cls(TODAY, rates, stat_types, set_types, axis, **kw)
            for network, player, body in bodies:
                normalizer.add(parse(body, "json"), network=network, player=player)
            normalizer.flush()

        return run

    variants["parse"] = parse_only
    variants["fast"] = normalise_with(ours)
    variants["tree"] = normalise_with(ours, fast=False)
    if baseline:
        variants["baseline"] = normalise_with(_normalizer_class(baseline))
    recorded = RECORDED.read_bytes()
    sets = {
        "sandbox": data["bodies"],
        "recorded": [("PokerStars", f"recorded{i}", recorded) for i in range(50)],
    }
    out: dict[str, Any] = {}
    for label, bodies in sets.items():
        wall: dict[str, list[float]] = {k: [] for k in variants}
        cpu: dict[str, list[float]] = {k: [] for k in variants}
        for fn in variants.values():  # warm: first Arrow calls, imports
            fn(bodies[:20])
        for _ in range(rounds):
            for name, fn in variants.items():
                gc.collect()
                t0, c0 = time.perf_counter(), time.process_time()
                fn(bodies)
                wall[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
        med = {k: statistics.median(v) for k, v in wall.items()}
        med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
        out[label] = {
            "summaries": len(bodies),
            "median_s": {k: round(v, 4) for k, v in med.items()},
            "ratio_to_parse": {k: round(v / med["parse"], 2) for k, v in med.items() if k != "parse"},
            # CPU time of this process: less disturbed by other work on a shared machine
            "median_cpu_s": {k: round(v, 4) for k, v in med_cpu.items()},
            "cpu_ratio_to_parse": {k: round(v / med_cpu["parse"], 2) for k, v in med_cpu.items() if k != "parse"},
            # the least disturbed round of each
            "min_cpu_ratio_to_parse": {k: round(min(v) / min(cpu["parse"]), 2) for k, v in cpu.items() if k != "parse"},
        }
    return out


def _synthetic(bodies: list[tuple[str, str, bytes]], i: int) -> tuple[str, str, bytes]:
    network, player, body = bodies[i % len(bodies)]
    cycle = i // len(bodies)
    if cycle:  # new tournament ids for every pass over the bodies: nothing shared
        body = body.replace(b'"@id":"1', b'"@id":"' + str(cycle).encode() + b"x1")
    return network, f"{player}#{i}", body


def _rss_child(data_path: str, players: int, baseline: str | None) -> dict[str, Any]:
    import psutil

    from tourneylake.api.tree import parse

    data = pickle.loads(Path(data_path).read_bytes())
    bodies = data["bodies"]
    rates, stat_types, set_types, axis = data["meta"]
    cls = _normalizer_class(baseline)
    normalizer = cls(TODAY, rates, stat_types, set_types, axis)
    process = psutil.Process()
    peak = process.memory_info().rss
    rows = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(players):
        network, player, body = _synthetic(bodies, i)
        normalizer.add(parse(body, "json"), network=network, player=player)
        if (i + 1) % BATCH == 0:
            rows += sum(t.num_rows for t in normalizer.flush().values())
            peak = max(peak, process.memory_info().rss)
    rows += sum(t.num_rows for t in normalizer.flush().values())
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = max(peak, process.memory_info().rss)
    import resource

    return {
        "players": players,
        "rows": rows,
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),
        "peak_rss_mb": round(peak / 2**20, 1),
        "ru_maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["speed", "rss", "_rss_child"])
    parser.add_argument("--players", default=None)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--baseline", default=None, help="another summary.py to compare with")
    parser.add_argument("--data", default=None, help="(internal) pickled bodies")
    args = parser.parse_args(argv)
    if args.what == "_rss_child":
        print(json.dumps(_rss_child(args.data, int(args.players), args.baseline)))
        return
    with tempfile.TemporaryDirectory(prefix="tourneylake-normalise-") as tmp:
        data_path = Path(tmp) / "bodies.pkl"
        fetch(int(args.players or 500) if args.what == "speed" else 500, data_path)
        if args.what == "speed":
            result = _speed(pickle.loads(data_path.read_bytes()), args.rounds, args.baseline)
            print(json.dumps(result, indent=2))
            return
        sizes = [int(p) for p in (args.players or "2000,20000").split(",")]
        results = []
        for variant in [None, args.baseline] if args.baseline else [None]:
            for players in sizes:
                cmd = [sys.executable, "-m", "benchmarks.normalise", "_rss_child", "--players", str(players)]
                cmd += ["--data", str(data_path)] + (["--baseline", variant] if variant else [])
                line = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True, timeout=3600).stdout
                figure = json.loads(line.strip().splitlines()[-1])
                figure["variant"] = "baseline" if variant else "ours"
                results.append(figure)
                print(json.dumps(figure), flush=True)


if __name__ == "__main__":
    main()
