"""The Dagster UI as a user runs it: `dagster dev` on a loopback port with the project's instance
(the checked-in dagster.yaml), a night launched through its GraphQL API (at once: nothing else
runs) and a Materialize behind it (queued), and a night run from the command line — all in the
one instance, with their materialisations (row counts) and checks. Then a standby beside it (as
`make dagster` starts one): the nights launched from the UI fork from it
(pipelines/standby_launcher.py), and a night terminated from the UI, in its harvest or while its
first free call waits, ends canceled, its worker stopped."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from benchmarks.ui_vs_cli import LAUNCH, dagster_dev, stop_group
from benchmarks.ui_vs_cli import graphql as _graphql
from tests.end_to_end.test_cli import _summaries_kept
from tests.end_to_end.test_standby import standby
from tests.helpers import REPO

pytestmark = [pytest.mark.xdist_group("webserver"), pytest.mark.slow]

RUNS = "query Runs { runsOrError(limit: 20) { ... on Runs { results { jobName status } } } }"
STATUS = "query Status($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status } } }"
IN_FLIGHT = ("QUEUED", "STARTING", "STARTED")
CARDS = "query Cards { assetNodes { assetKey { path } partitionStats { numMaterialized numPartitions } } }"


TERMINATE = """
mutation Terminate($runId: String!) {
  terminateRun(runId: $runId) { __typename ... on PythonError { message } }
}
"""
DONE = ("SUCCESS", "FAILURE", "CANCELED")


def _launch(url: str, night: str) -> str:
    params = {
        "selector": {"repositoryLocationName": "tourneylake", "repositoryName": "__repository__", "jobName": "nightly"},
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": night}]},
    }
    launched = _graphql(url, LAUNCH, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return str(launched["run"]["runId"])


def _ended(url: str, run_id: str, deadline: float) -> str:
    while time.monotonic() < deadline:
        status = _graphql(url, STATUS, {"id": run_id})["runOrError"]["status"]
        if status in DONE:
            return str(status)
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} did not end")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def quiet(url: str, deadline: float) -> None:
    """Wait until the freshness checks' run at start-up has ended: their sensor launches one at
    start-up (no check evaluated yet), then only at their deadlines, so a night launched once it
    has ended has nothing in flight beside it."""
    while True:
        runs = _graphql(url, RUNS, {})["runsOrError"]["results"]
        if runs and not any(run["status"] in IN_FLIGHT for run in runs):
            return
        assert time.monotonic() < deadline, f"the freshness checks' run at start-up did not end: {runs}"
        time.sleep(0.5)


def test_nights_from_the_ui_and_the_cli_share_the_instance_and_fork_from_a_standby(tmp_path: Path) -> None:
    from dagster import AssetKey, DagsterInstance, DagsterRunStatus

    from pipelines.standby_launcher import STANDBY_PID_TAG
    from tourneylake.lake.lake import Lake
    from tourneylake.sandbox import running_sandbox

    socket_file = tmp_path / "standby.sock"
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    port = _free_port()
    with running_sandbox(seed=7, today=date(2026, 11, 21)) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TOURNEYLAKE_", "DAGSTER_"))}
        env.update(
            DAGSTER_HOME=str(home),
            TOURNEYLAKE_BASE_URL=server.base_url,
            TOURNEYLAKE_DATA_DIR=str(tmp_path / "data"),
            TOURNEYLAKE_WATCHLIST=str(REPO / "watchlist.yaml"),
            TOURNEYLAKE_FIRST_NIGHT="2026-11-19",  # the lake is empty: its partitions would start yesterday
            PYTHONWARNINGS="ignore",
            TOURNEYLAKE_STANDBY=str(socket_file),  # none listens there until the second part
        )
        ui = dagster_dev(env, port, settle_s=0)  # its webserver answers once the code location has loaded
        try:
            url = f"http://127.0.0.1:{port}/graphql"
            deadline = time.monotonic() + 120
            quiet(url, deadline)
            params = {
                "selector": {"repositoryLocationName": "tourneylake", "repositoryName": "__repository__", "jobName": "nightly"},
                "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "2026-11-20"}]},
            }
            launched = _graphql(url, LAUNCH, {"params": params})["launchRun"]
            assert launched["__typename"] == "LaunchRunSuccess", launched
            run_id = launched["run"]["runId"]  # nothing else in flight: launched at once, not queued

            # The asset graph's "Materialize" (the implicit asset job): in-process, every step in
            # the run's process; launched while the night runs, so it waits in the queue.
            selector = {"repositoryLocationName": "tourneylake", "repositoryName": "__repository__", "jobName": "__ASSET_JOB"}
            selector["assetSelection"] = [{"path": [name]} for name in ("metadata", "countries", "news")]
            params = {"selector": selector, "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "2026-11-19"}]}}
            launched = _graphql(url, LAUNCH, {"params": params})["launchRun"]
            assert launched["__typename"] == "LaunchRunSuccess", launched
            materialised = launched["run"]["runId"]
            for launched_run in (run_id, materialised):
                status = None
                while time.monotonic() < deadline + 240:
                    status = _graphql(url, STATUS, {"id": launched_run})["runOrError"]["status"]
                    if status in ("SUCCESS", "FAILURE", "CANCELED"):
                        break
                    time.sleep(1)
                assert status == "SUCCESS"

            cli = subprocess.run(
                [sys.executable, "-m", "pipelines.cli", "run", "--date", "2026-11-21"],
                cwd=REPO, env=env, capture_output=True, text=True, timeout=240,
            )  # fmt: skip
            assert cli.returncode == 0, cli.stderr[-2000:]
            # The models' location ran its job after the UI's night (its sensor follows the nights' location).
            while time.monotonic() < deadline + 360:
                models = [run for run in _graphql(url, RUNS, {})["runsOrError"]["results"] if run["jobName"] == "models"]
                if any(run["status"] in ("SUCCESS", "FAILURE") for run in models):
                    break
                time.sleep(1)
            assert [run["status"] for run in models if run["status"] in ("SUCCESS", "FAILURE")][:1] == ["SUCCESS"], models
            # What the asset cards show: the nights from TOURNEYLAKE_FIRST_NIGHT to yesterday, three of them filled.
            cards = _graphql(url, CARDS, {})["assetNodes"]
            stats = {"/".join(node["assetKey"]["path"]): node["partitionStats"] for node in cards}
            nights = (datetime.now(UTC).date() - date(2026, 11, 19)).days  # to yesterday, both counted
            assert stats["metadata"] == {"numMaterialized": 3, "numPartitions": nights}

            # A standby beside dagster dev: the UI's nights fork from it, and stop when terminated.
            server.world.set_today(date(2026, 11, 24))
            server.app.plan.latency_ms = 300
            with standby(socket_file) as waiting:  # no settings of its own: each run has the launcher's
                forked = _launch(url, "2026-11-22")
                assert _ended(url, forked, deadline + 480) == "SUCCESS"
                stopped = _launch(url, "2026-11-23")
                while not _summaries_kept(Lake(tmp_path / "data"), date(2026, 11, 23)):  # into its harvest
                    assert time.monotonic() < deadline + 540, "the night's harvest did not start"
                    time.sleep(0.05)
                assert _graphql(url, TERMINATE, {"runId": stopped})["terminateRun"]["__typename"] == "TerminateRunSuccess"
                assert _ended(url, stopped, deadline + 600) == "CANCELED"
                asked = server.app.requests
                early = _launch(url, "2026-11-24")  # terminated while its first free call waits
                while server.app.requests == asked:
                    assert time.monotonic() < deadline + 660, "the night did not call the service"
                    time.sleep(0.02)
                assert _graphql(url, TERMINATE, {"runId": early})["terminateRun"]["__typename"] == "TerminateRunSuccess"
                assert _ended(url, early, deadline + 720) == "CANCELED"  # not tried again (it was)
                assert waiting.poll() is None
        finally:
            stop_group(ui)

    os.environ["DAGSTER_HOME"] = str(home)
    try:
        instance = DagsterInstance.get()
        starts = [e.dagster_event for e in instance.all_logs(materialised) if e.dagster_event and e.dagster_event.is_step_start]
        assert len(starts) >= 3 and len({event.pid for event in starts}) == 1  # in-process (with the checks on them)
        enqueued = {
            run: any(e.dagster_event and e.dagster_event.event_type_value == "PIPELINE_ENQUEUED" for e in instance.all_logs(run))
            for run in (run_id, materialised)
        }
        assert enqueued == {run_id: False, materialised: True}  # the queue only behind another run
        for forked_run in (forked, stopped, early):  # launched through the standby: its child ran them, then ended
            worker = int(instance.get_run_by_id(forked_run).tags[STANDBY_PID_TAG])  # type: ignore[union-attr]
            messages = [e.dagster_event.message or "" for e in instance.all_logs(forked_run) if e.dagster_event is not None]
            assert f"Started process for run (pid: {worker})." in messages and worker != waiting.pid
            with pytest.raises(ProcessLookupError):
                os.kill(worker, 0)
        assert STANDBY_PID_TAG not in instance.get_run_by_id(run_id).tags  # type: ignore[union-attr]  # none waited then
        runs = instance.get_runs()
        nights = {run.tags.get("dagster/partition"): run for run in runs}
        assert set(nights) >= {"2026-11-20", "2026-11-21"}
        assert all(nights[n].status == DagsterRunStatus.SUCCESS for n in ("2026-11-20", "2026-11-21"))
        for night in ("2026-11-20", "2026-11-21"):
            events = instance.all_logs(nights[night].run_id)
            rows = {
                e.dagster_event.step_materialization_data.materialization.asset_key: e.dagster_event.step_materialization_data.materialization.metadata
                for e in events
                if e.dagster_event is not None and e.dagster_event.is_step_materialization
            }
            assert rows[AssetKey(["warehouse", "player_snapshots"])]["dagster/row_count"].value > 0, night
            checks = [
                e for e in events if e.dagster_event is not None and e.dagster_event.event_type_value == "ASSET_CHECK_EVALUATION"
            ]
            assert {c.dagster_event.asset_check_evaluation_data.check_name for c in checks} >= {
                "no_failed_players",
                "night_snapshot_rows",
            }
        instance.dispose()
    finally:
        os.environ.pop("DAGSTER_HOME", None)
