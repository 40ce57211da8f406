"""The Dagster UI as a user runs it: `dagster dev` on a loopback port with the project's instance
(the checked-in dagster.yaml: Dagster's queue, launcher and SQLite storage), a night launched
through its GraphQL API and a Materialize beside it, both through the run queue, and a night run
from the command line — all in the one instance, with their materialisations (row counts) and
checks, and the models' location building the models after the UI's night."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.helpers import DEMO_ENV, REPO

pytestmark = [pytest.mark.xdist_group("webserver"), pytest.mark.slow]

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
RUNS = "query Runs { runsOrError(limit: 20) { ... on Runs { results { jobName status } } } }"
STATUS = "query Status($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status } } }"
CARDS = "query Cards { assetNodes { assetKey { path } partitionStats { numMaterialized numPartitions } } }"
DONE = ("SUCCESS", "FAILURE", "CANCELED")


def graphql(url: str, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    """One GraphQL request to the webserver; its data (an error raises)."""
    response = httpx.post(url, json={"query": query, "variables": variables}, timeout=60)
    response.raise_for_status()
    body = orjson.loads(response.content)
    if "errors" in body:
        raise RuntimeError(str(body["errors"])[:1000])
    return body["data"]


def dagster_dev(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    """``dagster dev`` of this checkout on a loopback ``port`` (its own process group), once its
    webserver answers (the code locations loaded)."""
    ui = subprocess.Popen(
        [sys.executable, "-m", "dagster", "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert ui.poll() is None, "dagster dev exited"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=2).status_code == 200:
                return ui
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    stop_group(ui)
    raise AssertionError("dagster dev did not come up")


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop ``process`` and its process group (``dagster dev``'s code servers, daemon, webserver)
    by its pid: Ctrl-C, then SIGKILL after a minute."""
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def _launch(url: str, job: str, night: str, assets: list[str] | None = None) -> str:
    selector: dict[str, Any] = {"repositoryLocationName": "tourneylake", "repositoryName": "__repository__", "jobName": job}
    if assets is not None:
        selector["assetSelection"] = [{"path": [name]} for name in assets]
    params = {"selector": selector, "executionMetadata": {"tags": [{"key": "dagster/partition", "value": night}]}}
    launched = graphql(url, LAUNCH, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return str(launched["run"]["runId"])


def _ended(url: str, run_id: str, deadline: float) -> str:
    while time.monotonic() < deadline:
        status = graphql(url, STATUS, {"id": run_id})["runOrError"]["status"]
        if status in DONE:
            return str(status)
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} did not end")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_nights_from_the_ui_and_the_cli_share_the_instance(tmp_path: Path) -> None:
    from dagster import AssetKey, DagsterInstance, DagsterRunStatus

    from tourneylake.sandbox import running_sandbox

    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    port = _free_port()
    with running_sandbox(seed=7, today=date(2026, 11, 21)) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TOURNEYLAKE_", "DAGSTER_"))}
        env.update(
            DAGSTER_HOME=str(home),
            TOURNEYLAKE_BASE_URL=server.base_url,
            **DEMO_ENV,
            TOURNEYLAKE_DATA_DIR=str(tmp_path / "data"),
            TOURNEYLAKE_WATCHLIST=str(REPO / "watchlist.yaml"),
            TOURNEYLAKE_FIRST_NIGHT="2026-11-19",  # the lake is empty: its partitions would start yesterday
            PYTHONWARNINGS="ignore",
        )
        ui = dagster_dev(env, port)
        try:
            url = f"http://127.0.0.1:{port}/graphql"
            deadline = time.monotonic() + 600
            run_id = _launch(url, "nightly", "2026-11-20")
            # The asset graph's "Materialize" (the implicit asset job, on Dagster's default executor).
            materialised = _launch(url, "__ASSET_JOB", "2026-11-19", ["metadata", "countries", "news"])
            assert _ended(url, run_id, deadline) == "SUCCESS"
            assert _ended(url, materialised, deadline) == "SUCCESS"

            cli = subprocess.run(
                [sys.executable, "-m", "tourneylake.pipelines.cli", "run", "--no-models", "--date", "2026-11-21"],
                cwd=REPO, env=env, capture_output=True, text=True, timeout=240,
            )  # fmt: skip
            assert cli.returncode == 0, cli.stderr[-2000:]
            # The models' location ran its job after the UI's night (its sensor follows the nights' location).
            while time.monotonic() < deadline:
                models = [run for run in graphql(url, RUNS, {})["runsOrError"]["results"] if run["jobName"] == "models"]
                if any(run["status"] in ("SUCCESS", "FAILURE") for run in models):
                    break
                time.sleep(1)
            assert [run["status"] for run in models if run["status"] in ("SUCCESS", "FAILURE")][:1] == ["SUCCESS"], models
            # What the asset cards show: the nights from TOURNEYLAKE_FIRST_NIGHT to yesterday, three of them filled.
            cards = graphql(url, CARDS, {})["assetNodes"]
            stats = {"/".join(node["assetKey"]["path"]): node["partitionStats"] for node in cards}
            nights = (datetime.now(UTC).date() - date(2026, 11, 19)).days  # to yesterday, both counted
            assert stats["metadata"] == {"numMaterialized": 3, "numPartitions": nights}
        finally:
            stop_group(ui)

    os.environ["DAGSTER_HOME"] = str(home)
    try:
        with DagsterInstance.get() as instance:
            for launched in (run_id, materialised):  # the UI's runs pass through Dagster's run queue
                events = [e.dagster_event for e in instance.all_logs(launched) if e.dagster_event is not None]
                assert any(event.event_type_value == "PIPELINE_ENQUEUED" for event in events)
            nights = {run.tags.get("dagster/partition"): run for run in instance.get_runs()}
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
                    e
                    for e in events
                    if e.dagster_event is not None and e.dagster_event.event_type_value == "ASSET_CHECK_EVALUATION"
                ]
                assert {c.dagster_event.asset_check_evaluation_data.check_name for c in checks} >= {
                    "no_failed_players",
                    "night_snapshot_rows",
                }
    finally:
        os.environ.pop("DAGSTER_HOME", None)
