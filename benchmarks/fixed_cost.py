"""A night's fixed cost: ``python -m benchmarks.fixed_cost [--repeats 5] [--tree PATH ...]``.

A one-player night is almost all fixed cost: ``tourneylake run`` (the whole process, from
launch to exit) against :mod:`benchmarks.bench_server` (its own process, answers precomputed,
``--latency-ms`` per call), its fetch a few milliseconds. Each round takes a fresh data
directory and Dagster home (``--warm``: the second night of one lake and instance, as a user's
every night after the first). Several ``--tree``s (another checkout's source, same virtual
environment: ``git archive <commit> | tar -x -C DIR``) alternate round by round; medians.

The breakdown, one more run per tree: a child process runs the same command line with timers
wrapped (by name) around the phases — the command line's imports, Dagster's, the definitions,
the instance, the run (its steps from the instance's event log, read afterwards by this
process), the fetch (the harvest's ``_fetch``), the warehouse load, the models job (once a
run, after its last night), the exit — and ``everything but the fetch`` is the whole process
less the fetch; ``the night but the fetch`` leaves the models job out too. Prints one JSON line; the
figures go to ``benchmarks/RESULTS.md`` with the machine and the date.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson

from benchmarks.common import (
    NIGHT,
    ROOT,
    BenchServer,
    measure,
    roster,
    run_env,
    scratch,
    write_watchlist,
)

CHILD = Path(__file__).resolve()


def _command(night: str, data: Path) -> list[str]:
    return ["run", "--date", night, "--data-dir", str(data)]


def _round(tree: Path, base_url: str, folder: Path, warm: bool) -> tuple[float, float]:
    """One whole ``tourneylake run`` from ``tree``: seconds from launch to exit, and its CPU
    seconds (its own and its reaped children's: steadier than the wall on a shared host)."""
    data, home = folder / "data", folder / "home"
    watchlist = write_watchlist(folder / "watchlist.yaml", roster(1))
    env = run_env(base_url, data, watchlist, home, 4, tree=tree)
    nights = [NIGHT - timedelta(days=1), NIGHT] if warm else [NIGHT]
    for index, night in enumerate(nights):
        done = measure(
            [sys.executable, "-m", "tourneylake.pipelines.cli", *_command(night.isoformat(), data)],
            env=env,
            cwd=tree,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"tourneylake run failed ({tree}): {done.stderr[-1500:]}")
        if index == len(nights) - 1:
            return done.seconds, done.user_s + done.sys_s
    raise AssertionError("unreachable")


def _breakdown(tree: Path, base_url: str, folder: Path, warm: bool) -> dict[str, float]:
    """One instrumented run (see the module docstring; ``warm``: a lake's second night), its
    phases in seconds."""
    data, home = folder / "data", folder / "home"
    watchlist = write_watchlist(folder / "watchlist.yaml", roster(1))
    marks_file = folder / "marks.json"
    if warm:
        env = run_env(base_url, data, watchlist, home, 4, tree=tree)
        before = (NIGHT - timedelta(days=1)).isoformat()
        subprocess.run(
            [sys.executable, "-m", "tourneylake.pipelines.cli", *_command(before, data)],
            env=env,
            cwd=tree,
            check=True,
            capture_output=True,
        )
    env = run_env(base_url, data, watchlist, home, 4, tree=tree, FIXED_COST_MARKS=str(marks_file), FIXED_COST_TREE=str(tree))
    launched = time.time()
    done = subprocess.run(
        [sys.executable, str(CHILD), *_command(NIGHT.isoformat(), data)], env=env, cwd=tree, capture_output=True, timeout=300
    )
    ended = time.time()
    if done.returncode != 0:
        raise RuntimeError(f"instrumented run failed ({tree}): {done.stderr[-1500:].decode(errors='replace')}")
    marks: dict[str, float] = orjson.loads(marks_file.read_bytes())
    steps = _steps(home)
    out = {
        "process_start_and_cli_imports": marks["cli_imported"] - launched,
        "dagster_and_assets_imports": marks["nightly_imported"] - marks["cli_imported"],
        "definitions": marks["definitions_end"] - marks["definitions_start"],
        "instance": marks.get("instance_end", 0.0) - marks.get("instance_start", 0.0),
        "run_setup": steps["first_start"] - marks["execute_start"],
        **{f"step_{name}": seconds for name, seconds in steps["steps"].items()},
        "between_steps": steps["gaps"],
        "run_teardown": marks["execute_end"] - steps["last_end"],
        "after_the_run": marks["run_night_end"] - marks["execute_end"],
        "models_job": marks.get("models_end", 0.0) - marks.get("models_start", 0.0),
        "summary_and_exit": ended - max(marks["run_night_end"], marks.get("models_end", 0.0)),
        "fetch": marks.get("fetch_end", 0.0) - marks.get("fetch_start", 0.0),
        "warehouse_load": marks.get("load_end", 0.0) - marks.get("load_start", 0.0),
        "whole": ended - launched,
    }
    out["everything_but_the_fetch"] = out["whole"] - out["fetch"]
    out["the_night_but_the_fetch"] = out["everything_but_the_fetch"] - out["models_job"]  # models: once a run
    return {name: round(value, 4) for name, value in out.items()}


def _steps(home: Path) -> dict[str, Any]:
    """The last run's steps (start to success), the gaps between them, from its event log."""
    os.environ["DAGSTER_HOME"] = str(home)
    from dagster import DagsterInstance, RunsFilter

    with DagsterInstance.get() as instance:
        (run,) = instance.get_runs(RunsFilter(job_name="nightly"), limit=1)
        spans: dict[str, list[float]] = {}
        for entry in instance.all_logs(run.run_id):
            event = entry.dagster_event
            if event is not None and event.event_type_value in ("STEP_START", "STEP_SUCCESS"):
                spans.setdefault(event.step_key or "?", []).append(entry.timestamp)
    ordered = sorted(spans.items(), key=lambda item: item[1][0])
    steps = {key: span[-1] - span[0] for key, span in ordered}
    whole = ordered[-1][1][-1] - ordered[0][1][0]
    return {
        "steps": steps,
        "gaps": whole - sum(steps.values()),
        "first_start": ordered[0][1][0],
        "last_end": ordered[-1][1][-1],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--tree", type=Path, action="append", help="source trees to compare (default: this one)")
    parser.add_argument("--warm", action="store_true", help="time a lake's second night (same data and instance)")
    args = parser.parse_args(argv)
    trees = [tree.resolve() for tree in args.tree or [ROOT]]

    walls: dict[str, list[tuple[float, float]]] = {str(tree): [] for tree in trees}
    breakdowns: dict[str, dict[str, float]] = {}
    with BenchServer(players=1, latency_ms=args.latency_ms) as server:
        for _ in range(args.repeats):
            for tree in trees:
                with scratch("tourneylake-fixed-") as folder:
                    walls[str(tree)].append(_round(tree, server.base_url, folder, args.warm))
        for tree in trees:
            with scratch("tourneylake-fixed-") as folder:
                breakdowns[str(tree)] = _breakdown(tree, server.base_url, folder, args.warm)
    result = {
        "benchmark": "fixed_cost",
        "latency_ms": args.latency_ms,
        "warm": args.warm,
        "trees": {
            tree: {
                "whole_median_s": round(statistics.median(t for t, _ in rounds), 3),
                "cpu_median_s": round(statistics.median(c for _, c in rounds), 3),
                "rounds": [[round(t, 3), round(c, 3)] for t, c in rounds],
            }
            for tree, rounds in walls.items()
        },
        "breakdown": breakdowns,
    }
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    return 0


# ----------------------------------------------------------------------------- the child


def _child() -> None:  # pragma: no cover - run as a script by _breakdown
    """``tourneylake run`` with timers around its phases, written to $FIXED_COST_MARKS at exit."""
    import atexit

    sys.path.insert(0, os.environ["FIXED_COST_TREE"])
    marks: dict[str, float] = {}

    def timed(owner: Any, name: str, label: str, *, is_async: bool = False, static: bool = False) -> None:
        original = getattr(owner, name)

        if is_async:

            async def wrapper_async(*args: Any, **kwargs: Any) -> Any:
                marks[f"{label}_start"] = time.time()
                try:
                    return await original(*args, **kwargs)
                finally:
                    marks[f"{label}_end"] = time.time()

            setattr(owner, name, wrapper_async)
            return

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            marks.setdefault(f"{label}_start", time.time())
            try:
                return original(*args, **kwargs)
            finally:
                marks.setdefault(f"{label}_end", time.time())  # the first call's (the night's, not the models')

        setattr(owner, name, staticmethod(wrapper) if static else wrapper)

    import tourneylake.pipelines.cli as cli

    marks["cli_imported"] = time.time()
    from dagster import DagsterInstance, JobDefinition

    import tourneylake.night.harvest as harvest
    import tourneylake.pipelines.nightly as nightly
    from tourneylake.tables.warehouse import Warehouse

    marks["nightly_imported"] = time.time()
    timed(nightly, "build_definitions", "definitions")
    timed(nightly, "run_night", "run_night")
    timed(cli, "build_models", "models")
    timed(JobDefinition, "execute_in_process", "execute")
    timed(harvest, "_fetch", "fetch", is_async=True)
    timed(Warehouse, "load_night", "load")
    for factory in ("get", "ephemeral"):
        original = getattr(DagsterInstance, factory)

        def opened(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            marks.setdefault("instance_start", time.time())
            try:
                return _original(*args, **kwargs)
            finally:
                marks.setdefault("instance_end", time.time())

        setattr(DagsterInstance, factory, staticmethod(opened))
    atexit.register(lambda: Path(os.environ["FIXED_COST_MARKS"]).write_bytes(orjson.dumps(marks)))
    sys.argv = ["tourneylake", *sys.argv[1:]]
    cli.main()


if __name__ == "__main__":
    if os.environ.get("FIXED_COST_MARKS"):
        _child()
    raise SystemExit(main())
