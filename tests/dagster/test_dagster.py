"""The Dagster side: the one Definitions (loaded once), real materialisations against the
sandbox, asset invocation with build_asset_context, the schedule, and EnvVar-bound secrets."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    MaterializeResult,
    build_asset_context,
    build_schedule_context,
    materialize,
)

from tests.helpers import DEMO_ACCOUNT, DEMO_ENV, REPO
from tourneylake.assets.models import dbt_models
from tourneylake.assets.reference import countries, metadata, news
from tourneylake.assets.resource import TourneylakeResource
from tourneylake.config import SANDBOX_PASSWORD
from tourneylake.pipelines.definitions import definitions_from_env
from tourneylake.pipelines.definitions import defs as code_location
from tourneylake.pipelines.models import defs as models_code_location
from tourneylake.tables.warehouse import LOAD_ORDER

pytestmark = [pytest.mark.xdist_group("dagster"), pytest.mark.slow]

NIGHT = date(2026, 11, 20)
MODELS = ("latest_player_statistics", "player_statistics_over_time", "player_results_usd", "roi_by_stake_usd")
defs = code_location()  # what `dagster dev` loads, built once for the module: the nights' location,
models_location = models_code_location()  # the models' location beside it,
everything = definitions_from_env(with_models=True)  # and a deployment's one location with both


SANDBOX = dict(seed=2, today=NIGHT)


def test_definitions_hold_the_assets_checks_jobs_and_schedule() -> None:
    """Two code locations: the nights (no model: a night's run loads no dbt) and the models, whose
    upstream keys are the nights' tables; a deployment's one location holds both."""
    tables = {f"warehouse/{name}" for name in LOAD_ORDER}
    models = {key.to_user_string() for key in dbt_models.keys}
    nights = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert nights == {"metadata", "countries", "news", "player_summaries", "warehouse", "hand_analyses"} | tables
    made_there = models_location.resolve_asset_graph()
    assert {key.to_user_string() for key in made_there.materializable_asset_keys} == models | {"nightly_report"}
    assert {key.to_user_string() for key in made_there.get_all_asset_keys()} - models - {"nightly_report"} <= tables
    graph = everything.resolve_asset_graph()
    assert {key.to_user_string() for key in graph.get_all_asset_keys()} == nights | models | {"nightly_report"}
    assert {key.to_user_string() for key in graph.get(AssetKey("nightly_report")).parent_keys} <= models, (
        "after the models it reads"
    )
    assert len(LOAD_ORDER) == 17 and {f"warehouse/{name}" for name in MODELS} <= models
    assert all(graph.get(key).group_name == "models" for key in dbt_models.keys)
    checks = {(c.asset_key.to_user_string(), c.name) for c in graph.asset_check_keys}
    assert {
        ("player_summaries", "budget_respected"),
        ("player_summaries", "no_failed_players"),
        ("warehouse/tournaments", "source_unique_key_warehouse_tournaments_network__tournament_id"),
        ("warehouse/tournament_entries", "source_unique_key_warehouse_tournament_entries_network__tournament_id__player"),
        ("warehouse/tournaments", "stake_currencies_converted"),
        ("warehouse/player_snapshots", "night_snapshot_rows"),
        ("warehouse/player_results_usd", "unique_key_player_results_usd_network__tournament_id__player"),
    } <= checks
    # The dbt tests run with the models, never in the partitioned nightly job.
    nightly_checks = {"budget_respected", "no_failed_players", "watchlist_valid", "schema_drift", "night_snapshot_rows", "night_statistic_rows"}  # fmt: skip
    for location in (defs, everything):
        assert {c.name for c in location.resolve_job_def("nightly").asset_layer.asset_graph.asset_check_keys} == nightly_checks
    assert {c.name for c in models_location.resolve_asset_graph().asset_check_keys} == {c.name for c in dbt_models.check_keys}
    # The sensor that runs the models after a night follows the other location's nightly runs:
    # tests/dagster/test_webserver.py sees it launch the models job after a UI night.
    # Lineage: each table from the lake asset that writes it, each model from what it reads.
    assert graph.get(AssetKey(["warehouse", "tournaments"])).parent_keys == {AssetKey("player_summaries")}
    assert graph.get(AssetKey(["warehouse", "currencies"])).parent_keys == {AssetKey("metadata")}
    assert graph.get(AssetKey(["warehouse", "latest_player_statistics"])).parent_keys == {
        AssetKey(["warehouse", "player_statistics"])
    }
    assert graph.get(AssetKey(["warehouse", "roi_by_stake_usd"])).parent_keys == {
        AssetKey(["warehouse", "player_results_usd"]),
        AssetKey(["warehouse", "stake_buckets"]),
    }
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
    from tourneylake.pipelines.definitions import build_definitions

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
    """Every job of one account, and the UI's "Materialize" (the implicit asset job), runs
    in-process (several accounts: tests/dagster/test_executors.py)."""
    for location, name in (
        (defs, "nightly"),
        (defs, "hands"),
        (defs, "rebuild"),
        (defs, "freshness"),
        (models_location, "models"),
    ):
        assert location.resolve_job_def(name).executor_def.name == "in_process", name
    assert defs.resolve_implicit_global_asset_job_def().executor_def.name == "in_process"


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


NIGHTS_LOCATION = """
import sys
from tourneylake.pipelines.definitions import defs
job = defs().resolve_job_def("nightly")
print((sorted(job.asset_layer.executable_asset_keys), sorted(job.asset_layer.asset_graph.asset_check_keys)))
print(sorted(name for name in sys.modules if name.split(".")[0] in ("dbt", "dagster_dbt") or name == "tourneylake.assets.models"))
"""


def test_the_nights_code_location_imports_no_dbt(tmp_path: Path) -> None:
    """A night's run (from the UI: a process that loads its code location; from `tourneylake
    run`: the same Definitions) imports neither dbt-core nor dagster-dbt (slow to import); its
    nightly job is the deployment's, which holds the models too."""
    env = {**os.environ, "TOURNEYLAKE_DATA_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", NIGHTS_LOCATION], cwd=REPO, capture_output=True, text=True, timeout=180, env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    night_job, imported = result.stdout.strip().splitlines()
    job = everything.resolve_job_def("nightly")
    assert night_job == str((sorted(job.asset_layer.executable_asset_keys), sorted(job.asset_layer.asset_graph.asset_check_keys)))
    assert imported == "[]"


def test_reference_assets_materialise_and_metadata_is_cached_by_hash(sandbox, tmp_path: Path) -> None:
    from tourneylake.lake.lake import Lake

    resource = TourneylakeResource(base_url=sandbox.base_url, **DEMO_ACCOUNT, data_dir=str(tmp_path))
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
    assert lake.tables.nights("currencies") == [NIGHT, following]
    assert lake.tables.read_table("currencies", following).drop_columns(["snapshot_date"]) == lake.tables.read_table(
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
    resource = TourneylakeResource(base_url=sandbox.base_url, **DEMO_ACCOUNT, data_dir=str(tmp_path))
    result = materialize([metadata], partition_key=NIGHT.isoformat(), resources={"tourneylake": resource}, raise_on_error=False)
    assert not result.success
    assert not [
        e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"
    ]  # the retry policy is for transient failures
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    description = failure.step_failure_data.user_failure_data.description
    assert description.startswith(f"the data directory {tmp_path} holds data from source") and "\n" not in description


def test_an_asset_invoked_directly_with_build_asset_context(sandbox, tmp_path: Path) -> None:
    resource = TourneylakeResource(base_url=sandbox.base_url, **DEMO_ACCOUNT, data_dir=str(tmp_path))
    result = news(build_asset_context(partition_key=NIGHT.isoformat()), resource)
    assert isinstance(result, MaterializeResult)
    assert result.metadata["rows"] > 0 and result.metadata["warnings"] == "none"


def test_envvar_bound_secrets_never_reach_the_event_log(sandbox, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TOURNEYLAKE_BASE_URL", sandbox.base_url)
    for variable, value in DEMO_ENV.items():
        monkeypatch.setenv(variable, value)
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

    from tourneylake.lake.lake import Lake
    from tourneylake.pipelines.definitions import build_definitions

    sandbox.world.set_today(NIGHT)
    resource = TourneylakeResource(
        base_url=sandbox.base_url, **DEMO_ACCOUNT, data_dir=str(tmp_path), watchlist=str(REPO / "watchlist.yaml")
    )
    definitions = build_definitions(resource, "0 3 * * *", first=NIGHT)
    with DagsterInstance.ephemeral() as instance:
        assert (
            definitions.resolve_job_def("nightly").execute_in_process(partition_key=NIGHT.isoformat(), instance=instance).success
        )
        lake = Lake(tmp_path)
        before = sorted(map(repr, lake.tables.read_table("player_statistics", NIGHT).to_pylist()))
        monkeypatch.setattr(httpx.HTTPTransport, "handle_request", lambda *a, **k: pytest.fail("the rebuild made a request"))
        result = definitions.resolve_job_def("rebuild").execute_in_process(partition_key=NIGHT.isoformat(), instance=instance)
    assert result.success
    assert (
        sorted(map(repr, lake.tables.read_table("player_statistics", NIGHT).to_pylist())) == before and before
    )  # rows, in any order


def test_a_night_then_its_models_built_below_the_tables_with_the_dbt_tests_as_checks(
    sandbox, tmp_path: Path, monkeypatch
) -> None:
    """The sensor asks for the models after a night (not after one whose runner builds them
    itself); the models job builds every model and runs every dbt test as an asset check; a test
    that fails fails the build, as dbt's does, and the command line names it."""
    import duckdb
    import typer
    from dagster import RunRequest, SkipReason, build_run_status_sensor_context

    from tourneylake.pipelines.cli import build_models, console
    from tourneylake.pipelines.definitions import BUILT_BY_RUN, MODELS_TAG, build_definitions
    from tourneylake.pipelines.definitions import models_location as models_location_of

    sandbox.world.set_today(NIGHT)
    resource = TourneylakeResource(
        base_url=sandbox.base_url, **DEMO_ACCOUNT, data_dir=str(tmp_path), watchlist=str(REPO / "watchlist.yaml")
    )
    nights = build_definitions(resource, "0 3 * * *", first=NIGHT, with_models=False)  # the two locations, on one resource
    definitions = models_location_of(resource)
    sensor = definitions.resolve_sensor_def("models_after_nightly")
    with DagsterInstance.ephemeral() as instance:
        nightly = nights.resolve_job_def("nightly")
        asks = {}
        for tags in ({}, {MODELS_TAG: BUILT_BY_RUN}):
            night = nightly.execute_in_process(partition_key=NIGHT.isoformat(), instance=instance, tags=tags)
            context = build_run_status_sensor_context(
                sensor_name=sensor.name,
                dagster_instance=instance,
                dagster_run=night.dagster_run,
                dagster_event=night.get_run_success_event(),
            )
            asks[bool(tags)] = sensor(context)
        assert isinstance(asks[False], RunRequest) and isinstance(asks[True], SkipReason)
        result = definitions.resolve_job_def("models").execute_in_process(instance=instance)
    assert result.success
    _the_models_and_their_checks(result, tmp_path)
    with duckdb.connect(str(resource.settings().warehouse_path)) as con:  # a stake neither converted nor flagged
        con.execute("UPDATE tournaments SET stake_usd = NULL, usd_rate_missing = false WHERE tournament_id = "
                    "(SELECT min(tournament_id) FROM tournaments WHERE stake_usd IS NOT NULL)")  # fmt: skip
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with console.capture() as captured, pytest.raises(typer.Exit) as failed:
        build_models(resource.settings())  # `tourneylake run`'s models: the job, in its process
    assert failed.value.exit_code == 1
    assert "models failed" in captured.get() and "tests not passing: stake_currencies_converted" in captured.get()


def _the_models_and_their_checks(result: Any, tmp_path: Path) -> None:
    built = {m.asset_key.to_user_string() for m in result.get_asset_materialization_events() for m in [m.materialization]}
    assert built == {key.to_user_string() for key in dbt_models.keys} | {"nightly_report"}  # the report after the models
    report = result.asset_materializations_for_node("nightly_report")[0].metadata
    assert (
        report["path"].value == str(tmp_path / "reports" / f"{NIGHT}.html") and (tmp_path / "reports" / f"{NIGHT}.html").is_file()
    )
    assert f"Report of the night of {NIGHT}" in report["preview"].value
    evaluations = {e.asset_check_evaluation_data.check_name: e.asset_check_evaluation_data.passed for e in result.all_events
                   if e.event_type_value == "ASSET_CHECK_EVALUATION"}  # fmt: skip
    assert set(evaluations) == {key.name for key in dbt_models.check_keys} and all(evaluations.values())
    assert "stake_currencies_converted" in evaluations


def test_the_drain_job_spends_expiring_searches_on_the_pairs_owed_and_loads_their_night(sandbox, tmp_path: Path) -> None:
    """Off by default, before the reset: the drain job fetches what a capped night owed, into
    that night, and loads it into the warehouse."""
    from tourneylake.night.harvest import harvest_players
    from tourneylake.night.session import Session
    from tourneylake.night.watchlist import load_watchlist
    from tourneylake.pipelines.definitions import build_definitions
    from tourneylake.tables.warehouse import Warehouse

    owed_night = date(2026, 11, 19)
    sandbox.world.set_today(NIGHT)
    watchlist = str(REPO / "watchlist.yaml")
    capped = TourneylakeResource(
        base_url=sandbox.base_url, **DEMO_ACCOUNT, data_dir=str(tmp_path), watchlist=watchlist, max_searches_per_run=2
    )
    nightly = harvest_players(Session.open(capped.settings(), sandbox.base_url, owed_night), load_watchlist(watchlist))
    assert nightly.fetched == 2 and nightly.deferred

    definitions = build_definitions(
        TourneylakeResource(base_url=sandbox.base_url, **DEMO_ACCOUNT, data_dir=str(tmp_path), watchlist=watchlist), "0 3 * * *"
    )
    schedule = definitions.resolve_schedule_def("drain_schedule")
    assert schedule.cron_schedule == "30 7 * * *" and schedule.default_status.value == "STOPPED"
    time_of_day, sandbox.world.time_of_day = sandbox.world.time_of_day, 7 * 3600 + 30 * 60  # the schedule's 07:30
    try:
        with DagsterInstance.ephemeral() as instance:
            result = definitions.resolve_job_def("drain").execute_in_process(instance=instance)
    finally:
        sandbox.world.time_of_day = time_of_day
    assert result.success
    with Warehouse(tmp_path / "warehouse.duckdb", read_only=True) as db:
        rows = db.query("SELECT count(*) AS n FROM player_snapshots WHERE snapshot_date = $1", [owed_night]).to_pylist()
    assert rows == [{"n": 2 + len(nightly.deferred)}]
