"""``tourneylake status`` on a year of nights: ``python -m benchmarks.status [--nights 365] [--players 13]``.

One night is harvested for real from the sandbox (in its own process), loaded and recorded as a
run records it; its raw answers, ledger, table partitions and record are then copied to
``--nights`` nights before it, so the lake holds a year of the same shape. Timed: the status
read in process (:func:`tourneylake.night.status.lake_status`, median of ``--repeats``), and the
whole ``tourneylake status`` and ``tourneylake status --json`` commands (process start to exit).
Prints one JSON line; the figures go to ``benchmarks/RESULTS.md`` by hand, with the machine.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import orjson

from benchmarks.common import ROOT, SandboxProcess, prepare_night, roster, scratch, tourneylake_exe, watchlist_for


def _copy_night(lake_root: Path, night: str, to: str) -> None:
    """Every folder of ``night`` (raw answers, ledger, table partitions) and its record, as ``to``."""
    for folder in lake_root.glob(f"*/snapshot_date={night}"):
        shutil.copytree(folder, folder.with_name(f"snapshot_date={to}"))
    record = lake_root / "_state" / "nights" / f"{night}.json"
    text = record.read_text().replace(night, to)
    (record.parent / f"{to}.json").write_text(text)


def build_year(data_dir: Path, players: int, nights: int) -> None:
    from tourneylake.lake.nightlog import NightLog
    from tourneylake.night.harvest import harvest_players
    from tourneylake.night.status import record_harvest, record_load
    from tourneylake.tables.warehouse import Warehouse

    with SandboxProcess(players=max(players, 20), latency_ms=0) as sandbox:
        session = prepare_night(sandbox.base_url, data_dir)
        outcome = harvest_players(session, watchlist_for(roster(players)))
    night = session.night
    record_harvest(session.lake, night, "bench", None, outcome)
    with Warehouse(session.settings.warehouse_path) as db:
        record_load(session.lake, night, "bench", db.load_night(session.lake, night))
    root = Path(session.lake.root)
    for back in range(1, nights):
        _copy_night(root, night.isoformat(), (night - timedelta(days=back)).isoformat())
    assert len(NightLog(session.lake).all()) == nights


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--players", type=int, default=13)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    from tourneylake.config import Settings
    from tourneylake.night.status import lake_status

    with scratch("tourneylake-status-") as folder:
        data = folder / "data"
        build_year(data, args.players, args.nights)
        settings = Settings(data_dir=data)
        reads = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            found = lake_status(settings)
            reads.append(time.perf_counter() - t0)
        commands = {}
        for name, extra in (("status", []), ("status_json", ["--json"])):
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                done = subprocess.run(
                    [*tourneylake_exe(), "status", "--data-dir", str(data), *extra], cwd=ROOT, capture_output=True, timeout=300
                )
                times.append(time.perf_counter() - t0)
                assert done.returncode == 0, done.stderr[-1000:]
            commands[name] = statistics.median(times)
    print(
        orjson.dumps(
            {
                "benchmark": "status",
                "nights": len(found.nights),
                "players": args.players,
                "lake_mb": round(found.lake_bytes / 1e6, 1),
                "lake_status_s": round(statistics.median(reads), 4),
                "command_s": {k: round(v, 3) for k, v in commands.items()},
            }
        ).decode()
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
