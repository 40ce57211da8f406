"""The nightly job under Dagster's executors.

The job runs in-process for one account (``tourneylake run`` and the schedule alike) and
under the multiprocess executor for several, as a deployment on Celery, Docker or Kubernetes
would run it: every step in its own process, the code location loaded from
``tourneylake.pipelines.definitions:defs``, the settings from ``TOURNEYLAKE_*`` variables, a persistent
instance with the shipped pools. Two accounts make the two harvest steps independent, so they
run side by side. The lake and warehouse it leaves are the ones an in-process run leaves.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import pytest
from dagster import DagsterInstance, in_process_executor

from tests.helpers import REPO, accounts_run_side_by_side, dagster_cli_env, player_line, sandbox_settings, write_watchlist
from tourneylake.assets.resource import TourneylakeResource
from tourneylake.lake.lake import Lake
from tourneylake.pipelines.definitions import build_definitions
from tourneylake.pipelines.nightly import reconstructable_nightly, run_night
from tourneylake.sandbox import DEMO

NIGHT = date(2026, 11, 20)
ACCOUNTS = """accounts:
  - {name: left, username: left@example.com, password_env: TL_LEFT_PW}
  - {name: right, username: right@example.com, password_env: TL_RIGHT_PW}
"""


SANDBOX = dict(seed=5, today=NIGHT, players=100, latency_ms=30)
SANDBOX_USERS = [
    ("left@example.com", "left-pw", "subscriber", 10_000),
    ("right@example.com", "right-pw", "subscriber", 10_000),
]


def _night(sandbox, folder: Path):
    settings = sandbox_settings(sandbox, folder)
    roster = sandbox.world.roster(40)
    write_watchlist(settings, ACCOUNTS + "players:\n" + "\n".join(player_line(n, p) for n, p in roster) + "\n")
    return settings


def _tables(settings) -> dict[str, int]:
    lake = Lake(settings.data_dir)
    return {
        t: lake.tables.read_table(t, NIGHT).num_rows
        for t in ("player_snapshots", "player_statistics", "tournaments", "search_ledger")
    }


def test_the_nightly_job_runs_in_process_for_one_account_and_multiprocess_for_several() -> None:
    """Dagster's own executors: in-process for one account, multiprocess for several (each
    account's harvest in a process of its own), a deployment's when it passes one."""
    for accounts, executor in (([], "in_process"), (["left", "right"], "multiprocess")):
        definitions = build_definitions(TourneylakeResource(), "0 3 * * *", accounts)
        for job in (definitions.resolve_job_def("nightly"), definitions.resolve_implicit_global_asset_job_def()):
            assert job.executor_def.name == executor
    # A deployment passes its own executor (celery_executor, docker_executor, k8s_job_executor…):
    # the nightly job and its schedule take it, with the deployment's run config.
    deployed = build_definitions(TourneylakeResource(), "0 3 * * *", executor=in_process_executor)
    assert deployed.resolve_job_def("nightly").executor_def is in_process_executor
    assert deployed.resolve_schedule_def("nightly_schedule").job_name == "nightly"


@pytest.mark.slow
def test_the_nightly_job_under_the_multiprocess_executor_matches_in_process(sandbox, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TL_LEFT_PW", "left-pw")
    monkeypatch.setenv("TL_RIGHT_PW", "right-pw")
    in_process = _night(sandbox, tmp_path / "in_process").with_overrides(account_workers=1)  # one after another
    assert run_night(in_process, NIGHT).success

    multi = _night(sandbox, tmp_path / "multi")
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    config = tmp_path / "multiprocess.yaml"
    config.write_text(json.dumps({"execution": {"config": {"max_concurrent": 2}}}))
    env = dagster_cli_env(sandbox, multi, home, NIGHT)
    result = subprocess.run(
        [sys.executable, "-m", "dagster", "job", "execute", "-m", "tourneylake.pipelines.definitions", "-a", "defs", "-j", "nightly",
         "-c", str(config), "--tags", json.dumps({"dagster/partition": NIGHT.isoformat()})],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]

    monkeypatch.setenv("DAGSTER_HOME", str(home))  # the instance's event log lives under it
    logged = accounts_run_side_by_side(home)
    assert "left-pw" not in logged and DEMO.password not in logged
    assert _tables(multi) == _tables(in_process)
    assert Path(multi.warehouse_path).is_file()
    assert Lake(multi.data_dir).tables.read_table("player_snapshots", NIGHT).num_rows == 40


@pytest.mark.slow
def test_tourneylake_run_harvests_the_accounts_side_by_side(sandbox, tmp_path: Path, monkeypatch) -> None:
    """``tourneylake run`` (``run_night``) with several accounts: the nightly job on the
    multiprocess executor, each account's harvest in a process of its own, at the same time;
    the same tables as one account after another in one process."""
    monkeypatch.setenv("TL_LEFT_PW", "left-pw")
    monkeypatch.setenv("TL_RIGHT_PW", "right-pw")
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    side_by_side = _night(sandbox, tmp_path / "side_by_side")
    report = run_night(side_by_side, NIGHT)
    assert report.success, report.failure
    with DagsterInstance.get() as instance:
        (run,) = instance.get_runs()
        spans: dict[str, list[float]] = {}
        pids: dict[str, int] = {}
        for event in instance.all_logs(run.run_id):
            if event.step_key and event.dagster_event and event.dagster_event.event_type_value in ("STEP_START", "STEP_SUCCESS"):
                spans.setdefault(event.step_key, []).append(event.timestamp)
                pids[event.step_key] = event.dagster_event.pid
    (left_start, left_end), (right_start, right_end) = spans["player_summaries__left"], spans["player_summaries__right"]
    assert left_start < right_end and right_start < left_end  # at the same time
    assert pids["player_summaries__left"] != pids["player_summaries__right"] != os.getpid()
    assert {"player_summaries/left", "player_summaries/right", "warehouse"} <= set(report.assets)
    one_by_one = _night(sandbox, tmp_path / "one_by_one").with_overrides(account_workers=1)
    monkeypatch.delenv("DAGSTER_HOME")
    assert run_night(one_by_one, NIGHT).success
    assert _tables(side_by_side) == _tables(one_by_one)


def test_each_side_by_side_run_loads_the_job_of_its_own_accounts(tmp_path: Path, monkeypatch) -> None:
    """Dagster keeps the last job it loaded by its pointer: a second run in the same process with
    other accounts (or another first night) gets its own job, not the last one's."""
    monkeypatch.setenv("TOURNEYLAKE_DATA_DIR", str(tmp_path))
    first = reconstructable_nightly(["left", "right"], NIGHT).get_definition()
    again = reconstructable_nightly(["east", "west"], NIGHT).get_definition()
    assert {"player_summaries__left", "player_summaries__right"} <= {op.name for op in first.graph.node_defs}
    assert {"player_summaries__east", "player_summaries__west"} <= {op.name for op in again.graph.node_defs}
    assert "player_summaries__left" not in {op.name for op in again.graph.node_defs}
    earlier = reconstructable_nightly(["east", "west"], NIGHT - timedelta(days=5)).get_definition()
    assert earlier.partitions_def.get_first_partition_key() == (NIGHT - timedelta(days=5)).isoformat()
