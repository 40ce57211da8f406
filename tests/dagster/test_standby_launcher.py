"""Runs launched from the UI forked from ``tourneylake standby``: `dagster dev` on a loopback port
with the project's instance (its run launcher, pipelines/standby_launcher.py) and a standby
beside it; a night launched through the GraphQL API runs in the standby's child, and a night
terminated from the UI, in its harvest or while its first free call waits, ends canceled, its
worker stopped."""

from __future__ import annotations

import os
import shutil
import time
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from benchmarks.ui_vs_cli import LAUNCH, dagster_dev, stop_group
from benchmarks.ui_vs_cli import graphql as _graphql
from tests.dagster.test_webserver import STATUS, _free_port, quiet
from tests.end_to_end.test_cli import _summaries_kept
from tests.end_to_end.test_standby import standby
from tests.helpers import REPO

pytestmark = [pytest.mark.xdist_group("webserver"), pytest.mark.slow]

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


def test_ui_runs_fork_from_the_standby_and_terminate(tmp_path: Path) -> None:
    from dagster import DagsterInstance

    from pipelines.standby_launcher import STANDBY_PID_TAG
    from tourneylake.lake.lake import Lake
    from tourneylake.sandbox import running_sandbox

    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    socket_file = tmp_path / "standby.sock"
    port = _free_port()
    with running_sandbox(seed=7, today=date(2026, 11, 22), latency_ms=300) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TOURNEYLAKE_", "DAGSTER_"))}
        env.update(
            DAGSTER_HOME=str(home),
            TOURNEYLAKE_BASE_URL=server.base_url,
            TOURNEYLAKE_DATA_DIR=str(tmp_path / "data"),
            TOURNEYLAKE_WATCHLIST=str(REPO / "watchlist.yaml"),
            TOURNEYLAKE_FIRST_NIGHT="2026-11-19",
            TOURNEYLAKE_CONCURRENCY="2",
            TOURNEYLAKE_STANDBY=str(socket_file),
            PYTHONWARNINGS="ignore",
        )
        with standby(socket_file) as waiting:  # no settings of its own: each run has the launcher's
            ui = dagster_dev(env, port, settle_s=0)
            try:
                url = f"http://127.0.0.1:{port}/graphql"
                deadline = time.monotonic() + 180
                quiet(url, deadline)

                night = _launch(url, "2026-11-20")
                assert _ended(url, night, deadline + 240) == "SUCCESS"

                stopped = _launch(url, "2026-11-19")
                while not _summaries_kept(Lake(tmp_path / "data"), date(2026, 11, 19)):  # into its harvest
                    assert time.monotonic() < deadline + 300, "the second night's harvest did not start"
                    time.sleep(0.05)
                assert _graphql(url, TERMINATE, {"runId": stopped})["terminateRun"]["__typename"] == "TerminateRunSuccess"
                assert _ended(url, stopped, deadline + 360) == "CANCELED"

                asked = server.app.requests
                early = _launch(url, "2026-11-21")  # terminated while its first free call waits
                while server.app.requests == asked:
                    assert time.monotonic() < deadline + 420, "the third night did not call the service"
                    time.sleep(0.02)
                assert _graphql(url, TERMINATE, {"runId": early})["terminateRun"]["__typename"] == "TerminateRunSuccess"
                assert _ended(url, early, deadline + 480) == "CANCELED"  # not tried again (it was)
                assert waiting.poll() is None
            finally:
                stop_group(ui)

    os.environ["DAGSTER_HOME"] = str(home)
    try:
        instance = DagsterInstance.get()
        for run_id in (night, stopped, early):
            run: Any = instance.get_run_by_id(run_id)
            worker = int(run.tags[STANDBY_PID_TAG])  # launched through the standby
            messages = [
                entry.dagster_event.message or "" for entry in instance.all_logs(run_id) if entry.dagster_event is not None
            ]
            assert f"Started process for run (pid: {worker})." in messages and worker != waiting.pid
            with pytest.raises(ProcessLookupError):
                os.kill(worker, 0)  # the worker ended (reaped by the standby)
        instance.dispose()
    finally:
        os.environ.pop("DAGSTER_HOME", None)
