"""A night from the UI against the same night from the command line:
``python -m benchmarks.ui_vs_cli [--repeats 3] [--watchlist watchlist.yaml]``.

``dagster dev`` on a loopback port with the project's instance settings (a copy of
``dagster_home/dagster.yaml``: the pools, the run queue), the sandbox in its own process. Each
round harvests three fresh nights, one each way, alternating:

- ``ui_job``: the nightly job launched through the webserver's GraphQL API, as the launchpad
  does (queued, dequeued by the daemon, run by the code server's run worker);
- ``ui_assets``: the asset graph's "Materialize" of the nightly job's assets and their checks
  for one partition (the implicit asset job, with the Definitions' default executor);
- ``cli``: ``tourneylake run --date D`` on the same instance and lake (process start to exit).

A ``tourneylake standby`` waits beside them (as ``make dagster`` starts one): the UI's runs and
the command line's nights fork from it (``pipelines/standby.py``); ``--no-standby`` times the
way without one (each night in a fresh process: the code server's run worker, the command line's).

A UI night is timed from the launch request to the run's end as the API reports it (its
queueing and launch included), and its own duration (start to end) beside it. Prints one JSON
line with the medians and the ratios to the command line; the figures go to
``benchmarks/RESULTS.md`` by hand, with the machine and the date.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson

from benchmarks.common import ROOT, SandboxProcess, free_port, running_standby, scratch

LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""
STATUS = "query Status($id: ID!) { runOrError(runId: $id) { ... on Run { status startTime endTime } } }"
DONE = ("SUCCESS", "FAILURE", "CANCELED")


def graphql(url: str, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    """One GraphQL request to the webserver; its data (an error raises)."""
    response = httpx.post(url, json={"query": query, "variables": variables}, timeout=60)
    response.raise_for_status()
    body = orjson.loads(response.content)
    if "errors" in body:
        raise RuntimeError(str(body["errors"])[:1000])
    return body["data"]


def _nightly_selection() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The nightly job's assets and every check on them: what the asset graph's Materialize
    launches when the user selects them."""
    from pipelines.definitions import defs

    definitions = defs() if callable(defs) else defs  # (a checkout before it became a loader)
    keys = definitions.resolve_job_def("nightly").asset_layer.selected_asset_keys
    checks = [key for key in definitions.resolve_asset_graph().asset_check_keys if key.asset_key in keys]
    assets = [{"path": list(key.path)} for key in sorted(keys, key=lambda k: k.to_user_string())]
    return assets, [{"assetKey": {"path": list(c.asset_key.path)}, "name": c.name} for c in checks]


def _ui_night(url: str, night: date, job: str, selection: tuple[list[Any], list[Any]] | None) -> dict[str, float]:
    selector: dict[str, Any] = {"repositoryLocationName": "tourneylake", "repositoryName": "__repository__", "jobName": job}
    if selection is not None:
        selector["assetSelection"], selector["assetCheckSelection"] = selection
    params = {"selector": selector, "executionMetadata": {"tags": [{"key": "dagster/partition", "value": night.isoformat()}]}}
    t0 = time.perf_counter()
    launched = graphql(url, LAUNCH, {"params": params})["launchRun"]
    if launched["__typename"] != "LaunchRunSuccess":
        raise RuntimeError(str(launched)[:1000])
    run_id = launched["run"]["runId"]
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        run = graphql(url, STATUS, {"id": run_id})["runOrError"]
        if run["status"] in DONE:
            break
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    if run["status"] != "SUCCESS":
        raise RuntimeError(f"the {job} run of {night} ended {run['status']}")
    return {"wall_s": wall, "run_s": float(run["endTime"]) - float(run["startTime"])}


def _cli_night(env: dict[str, str], night: date) -> dict[str, float]:
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.command", "run", "--date", night.isoformat()],  # the console script's module
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=600,
    )
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-1500:].decode(errors="replace"))
    return {"wall_s": wall}


def dagster_dev(env: dict[str, str], port: int, *, settle_s: float = 5.0) -> subprocess.Popen[bytes]:
    """``dagster dev`` of this checkout on a loopback ``port`` (its own process group), once its
    webserver answers and ``settle_s`` more seconds (the daemon's first ticks) have passed."""
    ui = subprocess.Popen(
        [sys.executable, "-m", "dagster", "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if ui.poll() is not None:
            raise RuntimeError("dagster dev exited")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=2).status_code == 200:
                time.sleep(settle_s)
                return ui
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    stop_group(ui)
    raise RuntimeError("dagster dev did not come up")


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop ``process`` and its process group (``dagster dev``'s code servers, daemon, webserver)
    by its pid: Ctrl-C, then SIGKILL after a minute."""
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--watchlist", type=Path, default=ROOT / "watchlist.yaml")
    parser.add_argument("--no-standby", action="store_true", help="every night in a process of its own (no standby)")
    args = parser.parse_args(argv)
    today = datetime.now(UTC).date()
    nights = [today - timedelta(days=2 + i) for i in range(3 * args.repeats + 1)]  # one to warm up
    timings: dict[str, list[dict[str, float]]] = {"ui_job": [], "ui_assets": [], "cli": []}
    with ExitStack() as stack:
        folder = stack.enter_context(scratch("tourneylake-ui-"))
        sandbox = stack.enter_context(SandboxProcess(players=200, latency_ms=0, today=today))
        home = folder / "dagster_home"
        home.mkdir()
        shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TOURNEYLAKE_", "DAGSTER_"))}
        env.update(
            DAGSTER_HOME=str(home),
            TOURNEYLAKE_BASE_URL=sandbox.base_url,
            TOURNEYLAKE_DATA_DIR=str(folder / "data"),
            TOURNEYLAKE_WATCHLIST=str(args.watchlist.resolve()),
            TOURNEYLAKE_FIRST_NIGHT=nights[-1].isoformat(),
            PYTHONWARNINGS="ignore",
        )
        os.environ.update({k: v for k, v in env.items() if k.startswith("TOURNEYLAKE_")})
        selection = _nightly_selection()
        port = free_port()
        standby = None if args.no_standby else stack.enter_context(running_standby())
        env["TOURNEYLAKE_STANDBY"] = str(standby or "off")
        ui = dagster_dev(env, port)
        url = f"http://127.0.0.1:{port}/graphql"
        try:
            _cli_night(env, nights.pop())  # the instance's storage made, the sandbox warm
            for _ in range(args.repeats):
                timings["ui_job"].append(_ui_night(url, nights.pop(), "nightly", None))
                timings["ui_assets"].append(_ui_night(url, nights.pop(), "__ASSET_JOB", selection))
                timings["cli"].append(_cli_night(env, nights.pop()))
        finally:
            stop_group(ui)
    medians = {way: {k: round(statistics.median(t[k] for t in rows), 3) for k in rows[0]} for way, rows in timings.items()}
    cli = medians["cli"]["wall_s"]
    print(
        orjson.dumps(
            {
                "benchmark": "ui_vs_cli",
                "watchlist": str(args.watchlist),
                "standby": not args.no_standby,
                "medians": medians,
                "ratios_to_cli": {way: round(medians[way]["wall_s"] / cli, 2) for way in ("ui_job", "ui_assets")},
                "rounds": timings,
            }
        ).decode()
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
