"""The Dagster side: the one Definitions (loaded once), real materialisations against the
sandbox, asset invocation with build_asset_context, the schedule, and EnvVar-bound secrets."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    MaterializeResult,
    build_asset_context,
    build_schedule_context,
    materialize,
)

from assets.reference import countries, metadata, news
from assets.resource import TourneylakeResource
from assets.warehouse import VIEWS
from pipelines.definitions import defs as code_location
from tests.helpers import REPO
from tourneylake.config import SANDBOX_PASSWORD
from tourneylake.tables.warehouse import LOAD_ORDER

pytestmark = [pytest.mark.xdist_group("dagster"), pytest.mark.slow]

NIGHT = date(2026, 11, 20)
defs = code_location()  # what `dagster dev` loads, built once for the module


SANDBOX = dict(seed=2, today=NIGHT)


def test_definitions_hold_the_assets_checks_jobs_and_schedule() -> None:
    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    tables = {f"warehouse/{name}" for name in LOAD_ORDER} | {f"warehouse/{name}" for name in VIEWS}
    assert keys == {"metadata", "countries", "news", "player_summaries", "warehouse", "hand_analyses"} | tables
    assert len(LOAD_ORDER) == 16 and len(VIEWS) == 5
    checks = {(c.asset_key.to_user_string(), c.name) for c in graph.asset_check_keys}
    assert {
        ("player_summaries", "budget_respected"),
        ("player_summaries", "no_failed_players"),
        ("warehouse/tournaments", "tournaments_unique"),
        ("warehouse/tournament_entries", "entries_unique"),
        ("warehouse/tournaments", "stake_currencies_converted"),
        ("warehouse/player_snapshots", "night_snapshot_rows"),
    } <= checks
    # Lineage: each table from the lake asset that writes it, each view from what it reads.
    assert graph.get(AssetKey(["warehouse", "tournaments"])).parent_keys == {AssetKey("player_summaries")}
    assert graph.get(AssetKey(["warehouse", "currencies"])).parent_keys == {AssetKey("metadata")}
    assert (
        AssetKey(["warehouse", "player_statistics"]) in graph.get(AssetKey(["warehouse", "latest_player_statistics"])).parent_keys
    )
    schema = graph.get(AssetKey(["warehouse", "tournaments"])).metadata["dagster/column_schema"]
    assert {"network", "tournament_id", "snapshot_date"} <= {column.name for column in schema.columns}
    nightly = defs.resolve_job_def("nightly")
    assert {n.name for n in nightly.nodes_in_topological_order} >= {"metadata", "player_summaries", "warehouse"}
    assert "hand_analyses" not in {n.name for n in nightly.nodes_in_topological_order}  # opt-in
    schedule = defs.resolve_schedule_def("nightly_schedule")
    assert schedule.cron_schedule == "0 3 * * *" and schedule.execution_timezone == "UTC"
    players = next(a for a in defs.assets if AssetKey("player_summaries") in a.keys)
    assert players.op.pool == "tourneylake_service"  # one account: bounded sessions across runs


def test_the_schedule_asks_for_the_night_that_has_just_ended() -> None:
    from pipelines.definitions import build_definitions

    since = build_definitions(TourneylakeResource(), "0 3 * * *", first=date(2026, 11, 1))
    schedule = since.resolve_schedule_def("nightly_schedule")
    context = build_schedule_context(
        scheduled_execution_time=datetime(2026, 11, 22, 3, 0, tzinfo=UTC),
        repository_def=since.get_repository_def(),
    )
    (request,) = schedule.evaluate_tick(context).run_requests
    assert request.partition_key == "2026-11-21"  # fired at 03:00 on the 22nd: the 21st is over
    assert schedule.cron_schedule == "0 3 * * *" and schedule.execution_timezone == "UTC"


def test_a_run_builds_its_resource_once_in_one_process() -> None:
    for name in ("hands", "rebuild"):
        assert defs.resolve_job_def(name).executor_def.name == "in_process", name
    # The nightly job and the UI's "Materialize" (the implicit asset job) run in-process unless
    # run config asks for multiprocess (tests/test_executors.py).
    for job in (defs.resolve_job_def("nightly"), defs.resolve_implicit_global_asset_job_def()):
        assert job.executor_def.name == "multi_or_in_process_executor"
        assert job.executor_def.config_schema.as_field().default_value == {"in_process": {}}


def test_the_code_location_loads_as_dagster_dev_would() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate"],  # no arguments, as `dagster dev` finds it
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Validation successful" in result.stderr + result.stdout


def test_reference_assets_materialise_and_metadata_is_cached_by_hash(sandbox, tmp_path: Path) -> None:
    from tourneylake.lake.lake import Lake

    resource = TourneylakeResource(base_url=sandbox.base_url, data_dir=str(tmp_path))
    first = materialize([metadata, countries, news], partition_key=NIGHT.isoformat(), resources={"tourneylake": resource})
    assert first.success
    meta = first.asset_materializations_for_node("metadata")[0].metadata
    assert meta["downloaded"].value is True and meta["rows"].value > 0
    assert "CNY" in meta["currencies_without_rate"].value
    assert first.asset_materializations_for_node("countries")[0].metadata["rows"].value > 10

    again = materialize([metadata], partition_key=NIGHT.isoformat(), resources={"tourneylake": resource})
    assert again.asset_materializations_for_node("metadata")[0].metadata["called"].value is False  # held for the night

    # The next night, while the service's metadata is unchanged: one call, nothing downloaded,
    # and the night still holds its own metadata tables (the snapshot in force, under its date).
    following = date(2026, 11, 21)
    current = materialize([metadata], partition_key=following.isoformat(), resources={"tourneylake": resource})
    values = current.asset_materializations_for_node("metadata")[0].metadata
    assert values["called"].value is True and values["downloaded"].value is False
    lake = Lake(tmp_path)
    assert lake.partitions("currencies") == [NIGHT, following]
    assert lake.read_table("currencies", following).drop_columns(["snapshot_date"]) == lake.read_table(
        "currencies", NIGHT
    ).drop_columns(["snapshot_date"])

    sandbox.world.set_today(date(2026, 11, 22))  # rates refresh: the hash changes
    try:
        later = materialize([metadata], partition_key="2026-11-22", resources={"tourneylake": resource})
    finally:
        sandbox.world.set_today(NIGHT)
    assert later.asset_materializations_for_node("metadata")[0].metadata["downloaded"].value is True


def test_a_deliberate_failure_is_one_line_and_not_retried(sandbox, tmp_path: Path) -> None:
    from tourneylake.lake.lake import Lake

    Lake(tmp_path).claim("live:https://elsewhere.example")  # a data directory of another source
    resource = TourneylakeResource(base_url=sandbox.base_url, data_dir=str(tmp_path))
    result = materialize([metadata], partition_key=NIGHT.isoformat(), resources={"tourneylake": resource}, raise_on_error=False)
    assert not result.success
    assert not [
        e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"
    ]  # the retry policy is for transient failures
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    description = failure.step_failure_data.user_failure_data.description
    assert description.startswith(f"the data directory {tmp_path} holds data from source") and "\n" not in description


def test_an_asset_invoked_directly_with_build_asset_context(sandbox, tmp_path: Path) -> None:
    resource = TourneylakeResource(base_url=sandbox.base_url, data_dir=str(tmp_path))
    result = news(build_asset_context(partition_key=NIGHT.isoformat()), resource)
    assert isinstance(result, MaterializeResult)
    assert result.metadata["rows"] > 0 and result.metadata["warnings"] == "none"


def test_envvar_bound_secrets_never_reach_the_event_log(sandbox, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TOURNEYLAKE_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("TOURNEYLAKE_PASSWORD", SANDBOX_PASSWORD)
    monkeypatch.setenv("TOURNEYLAKE_DATA_DIR", str(tmp_path))
    resource = TourneylakeResource.from_env()
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [metadata, countries], partition_key=NIGHT.isoformat(), resources={"tourneylake": resource}, instance=instance
        )
        assert result.success
        text = "\n".join(str(record) for record in instance.all_logs(result.run_id))
    assert SANDBOX_PASSWORD not in text


def test_the_rebuild_job_remakes_a_night_from_raw_without_a_request(sandbox, tmp_path: Path, monkeypatch) -> None:
    import httpx

    from pipelines.definitions import build_definitions
    from tourneylake.lake.lake import Lake

    sandbox.world.set_today(NIGHT)
    resource = TourneylakeResource(base_url=sandbox.base_url, data_dir=str(tmp_path), watchlist=str(REPO / "watchlist.yaml"))
    definitions = build_definitions(resource, "0 3 * * *", first=NIGHT)
    with DagsterInstance.ephemeral() as instance:
        assert (
            definitions.resolve_job_def("nightly").execute_in_process(partition_key=NIGHT.isoformat(), instance=instance).success
        )
        lake = Lake(tmp_path)
        before = sorted(map(repr, lake.read_table("player_statistics", NIGHT).to_pylist()))
        monkeypatch.setattr(httpx.HTTPTransport, "handle_request", lambda *a, **k: pytest.fail("the rebuild made a request"))
        result = definitions.resolve_job_def("rebuild").execute_in_process(partition_key=NIGHT.isoformat(), instance=instance)
    assert result.success
    assert sorted(map(repr, lake.read_table("player_statistics", NIGHT).to_pylist())) == before and before  # rows, in any order
