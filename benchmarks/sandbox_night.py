"""What a night costs the sandbox itself: ``--players`` summaries served cold (a fresh world: the
roster, each player's history up to the night, one unfiltered summary rendered to JSON), in CPU
seconds of a fresh process, with the entries a summary counts and its body size on average.

With ``--base DIR`` (another checkout's source tree, e.g. ``git archive REV tourneylake | tar -x
-C DIR``) the two trees alternate, ``--rounds`` times each, and the medians are compared: how a
change to the world moves the sandbox's share of a night (benchmarks 1-5 warm their sandbox
before timing, so there it never shows).

    python -m benchmarks.sandbox_night --players 2000 --night 2026-11-25 --rounds 3 --base /tmp/base
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import orjson

from benchmarks.common import ROOT, SEED

_CHILD = """
import sys, time
from datetime import date
from tourneylake.sandbox.world import World
from tourneylake.sandbox.filtering import compile_filter
from tourneylake.sandbox.responses import fragment, summary_payload

players, night = int(sys.argv[1]), date.fromisoformat(sys.argv[2])
t0 = time.process_time()
world = World(int(sys.argv[3]), players, night)
everything = compile_filter("", world, world.day_end(night))
entries = size = 0
for network, name in world.roster():
    player = world.player(network, name)
    history = world.history(player, night)
    selected = everything.apply(history)
    entries += len(selected)
    last = history[-1].tournament.date if history else None
    payload = summary_payload(network, name, player.country, "", selected, last, world.rate_on, 30)
    size += len(fragment(payload, "json"))
print(f'{{"cpu_s": {time.process_time() - t0}, "entries": {entries / players}, "kib": {size / players / 1024}}}')
"""


def measure(tree: Path, players: int, night: date, timeout: float = 600) -> dict[str, float]:
    """One cold night in a fresh process importing ``tree``'s ``tourneylake`` (run in ``tree``,
    which ``-c`` puts first on the path, before the installed checkout)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(players), night.isoformat(), str(SEED)],
        env=env,
        cwd=tree,
        capture_output=True,
        check=True,
        timeout=timeout,
        text=True,
    )
    return orjson.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=2000)
    parser.add_argument("--night", type=date.fromisoformat, default=date(2026, 11, 25))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", type=Path, help="another source tree to alternate with this one")
    args = parser.parse_args(argv)
    arms = {"this": ROOT} | ({"base": args.base.resolve()} if args.base else {})
    runs: dict[str, list[dict[str, float]]] = {arm: [] for arm in arms}
    deadline = time.monotonic() + 3600
    for _ in range(max(1, args.rounds)):
        for arm, tree in arms.items():
            if time.monotonic() > deadline:
                break
            runs[arm].append(measure(tree, args.players, args.night))
            print(arm, runs[arm][-1], flush=True)
    medians = {arm: statistics.median(r["cpu_s"] for r in done) for arm, done in runs.items() if done}
    for arm, done in runs.items():
        if done:
            last = done[-1]
            print(f"{arm}: median {medians[arm]:.2f} CPU-s, {last['entries']:.0f} entries a summary, {last['kib']:.1f} KiB")
    if len(medians) == 2:
        print(f"this / base: {medians['this'] / medians['base']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
