"""Operating it every night, in Dagster: partitions from the user's first night, backfills too
large to pay for refused before a search, the watchlist's mistakes, freshness and drift
checks, the numbers Dagster plots, alerts. Real materialisations against the sandbox."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance

from tests.helpers import WebhookReceiver, player_line, remaining, sandbox_settings, write_watchlist
from tourneylake.assets.resource import TourneylakeResource
from tourneylake.config import SANDBOX_APPKEY
from tourneylake.lake.lake import Lake
from tourneylake.pipelines.definitions import build_definitions

pytestmark = [pytest.mark.xdist_group("operating"), pytest.mark.slow]

NIGHT = date(2026, 11, 20)
SANDBOX = dict(seed=3, today=NIGHT)
TWO_PAIRS = "filters:\n  sng: 'Class:SNG'\nplayers:\n" + player_line("PokerStars", "Borbas.Geri", "[sng]") + "\n"
TWO_PAIRS += player_line("GGNetwork", "José María") + "\n"


def _settings(sandbox, folder: Path, watchlist: str = TWO_PAIRS, **overrides):
    settings = sandbox_settings(sandbox, folder, **overrides)
    write_watchlist(settings, watchlist)
    return settings


def test_partitions_start_at_the_first_night_the_lake_holds_or_the_setting(sandbox, tmp_path: Path) -> None:
    from tourneylake.assets.nights import first_night

    empty = _settings(sandbox, tmp_path / "empty")
    resource = TourneylakeResource.from_settings(empty)
    assert first_night(empty) == datetime.now(UTC).date() - timedelta(days=1)  # an empty lake: yesterday
    Lake(empty.data_dir).raw.write(date(2026, 11, 12), "countries", {"k": "v"}, b"{}", "json", time.time())
    graph = build_definitions(resource, "0 3 * * *").resolve_asset_graph()
    keys = graph.get(AssetKey("player_summaries")).partitions_def.get_partition_keys()
    assert keys[0] == "2026-11-12"
    chosen = empty.with_overrides(first_night="2026-11-18")
    job = build_definitions(TourneylakeResource.from_settings(chosen), "0 3 * * *").resolve_job_def("rebuild")
    assert job.partitions_def.get_partition_keys()[0] == "2026-11-18"


def test_a_backfill_of_more_nights_than_allowed_is_refused_before_a_search(sandbox, tmp_path: Path) -> None:
    """Every run of a backfill of three nights (Dagster submits them all, tagged with its id)
    fails in its harvest step before a search when two are allowed."""
    from dagster import DagsterRun

    settings = _settings(sandbox, tmp_path, max_backfill_nights=2)
    definitions = build_definitions(TourneylakeResource.from_settings(settings), "0 3 * * *", first=date(2026, 11, 1))
    nights = ["2026-11-18", "2026-11-19", "2026-11-20"]
    before = remaining(settings)
    with DagsterInstance.ephemeral() as instance:
        for night in nights[:-1]:  # the backfill's other runs, submitted by the daemon and waiting in the queue
            tags = {"dagster/backfill": "toolarge", "dagster/partition": night}
            instance.add_run(DagsterRun(job_name="nightly", run_id=f"queued-{night}", tags=tags))
        result = definitions.resolve_job_def("nightly").execute_in_process(
            partition_key=nights[-1], instance=instance, tags={"dagster/backfill": "toolarge"}, raise_on_error=False
        )
        assert not result.success
        (failure,) = [e for e in result.all_events if e.is_step_failure]
        message = failure.step_failure_data.error.message
        assert "a backfill of 3 nights is refused" in message and "TOURNEYLAKE_MAX_BACKFILL_NIGHTS=2" in message
        assert remaining(settings) == before  # not a search
        assert not Lake(settings.data_dir).tables.nights("player_snapshots")
        alone = definitions.resolve_job_def("nightly").execute_in_process(
            partition_key=nights[-1], instance=instance, tags={"dagster/backfill": "small"}, raise_on_error=False
        )
        assert alone.success  # a backfill of one night (this run's) is allowed
    assert Lake(settings.data_dir).tables.nights("player_snapshots") == [date(2026, 11, 20)]


def test_a_backfill_that_would_spend_more_than_the_account_has_is_refused(sandbox, tmp_path: Path) -> None:
    from tourneylake.night.forecast import backfill_refusal
    from tourneylake.night.session import Session
    from tourneylake.night.watchlist import load_watchlist

    settings = _settings(sandbox, tmp_path)
    left = remaining(settings)
    nights = [date(2026, 11, 18), date(2026, 11, 19)]
    tight = settings.with_overrides(reserve_searches=left - 3)  # 3 searches above the reserve; 2 nights x 2 pairs
    session = Session.open(tight, sandbox.base_url, NIGHT)
    why = backfill_refusal(session, load_watchlist(settings.watchlist), nights)
    assert why is not None and "may spend up to 4 searches" in why and "has 3 left above its reserve" in why
    roomy = Session.open(settings.with_overrides(reserve_searches=left - 4), sandbox.base_url, NIGHT)
    assert backfill_refusal(roomy, load_watchlist(settings.watchlist), nights) is None
    assert remaining(settings) == left


def test_a_failed_night_is_recorded_and_posts_one_secret_free_alert(sandbox, tmp_path: Path) -> None:
    from dagster import build_run_status_sensor_context

    from tourneylake.lake.nightlog import NightLog
    from tourneylake.pipelines.failures import night_failed_sensor

    with WebhookReceiver() as hook:
        settings = _settings(sandbox, tmp_path, password="not-the-password", alert_webhook_url=hook.url)
        resource = TourneylakeResource.from_settings(settings)
        definitions = build_definitions(resource, "0 3 * * *", first=NIGHT)
        with DagsterInstance.ephemeral() as instance:
            result = definitions.resolve_job_def("nightly").execute_in_process(
                partition_key=NIGHT.isoformat(), instance=instance, raise_on_error=False
            )
            assert not result.success
            with build_run_status_sensor_context(
                sensor_name="night_failed",
                dagster_event=result.get_run_failure_event(),
                dagster_instance=instance,
                dagster_run=instance.get_run_by_id(result.run_id),
                resources={"tourneylake": resource},
            ).for_run_failure() as context:
                night_failed_sensor(context)
    (post,) = hook.posts
    assert post["night"] == NIGHT.isoformat() and post["job"] == "nightly" and post["run_id"] == result.run_id
    assert "credentials" in post["reason"] and post["searches_spent"] == 0 and post["text"].startswith("tourneylake:")
    assert not any(secret in str(post) for secret in ("not-the-password", "secret-token", SANDBOX_APPKEY))
    record = NightLog(Lake(settings.data_dir)).read(NIGHT)
    assert record["state"] == "failed" and record["run_id"] == result.run_id and "credentials" in record["reason"]


WRONG = (
    """filters:
  sng: 'Class:SNG'
  bad: 'Class:NOT_A_CLASS'
  vague: {question: "what is the meaning of life"}
players:
"""
    + player_line("PokerStars", "Borbas.Geri", "[sng, bad, vague]")
    + "\n"
    + player_line("NoSuchNetwork", "Someone")
    + "\n"
)


def test_pairs_the_watchlist_keeps_from_being_attempted_fail_a_check_and_the_rest_is_harvested(sandbox, tmp_path: Path) -> None:
    settings = _settings(sandbox, tmp_path, watchlist=WRONG)
    definitions = build_definitions(TourneylakeResource.from_settings(settings), "0 3 * * *", first=NIGHT)
    before = remaining(settings)
    with DagsterInstance.ephemeral() as instance:
        result = definitions.resolve_job_def("nightly").execute_in_process(partition_key=NIGHT.isoformat(), instance=instance)
    checks = {e.check_name: e for e in result.get_asset_check_evaluations() if e.asset_key == AssetKey("player_summaries")}
    assert not checks["watchlist_valid"].passed and checks["no_failed_players"].passed
    shown = checks["watchlist_valid"].metadata["not_attempted"].value
    assert "[bad]: invalid filter 'bad'" in shown and "[vague]: invalid filter 'vague': question not converted" in shown
    assert "NoSuchNetwork/Someone: unknown network 'NoSuchNetwork'" in shown
    (harvest,) = [
        e.materialization.metadata
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key == AssetKey("player_summaries")
    ]
    assert harvest["misconfigured"].value == 3 and harvest["players_fetched"].value == 1
    # What Dagster plots across nights: numbers, every night (an unknown one is left out, never null).
    plotted = ("searches_spent", "searches_left", "deferred", "failed", "misconfigured", "rows", "rows_player_snapshots")
    assert all(type(harvest[name]).__name__ == "IntMetadataValue" for name in plotted)
    assert before - remaining(settings) == 1  # the good pair only; nothing wrong costs a search
    snapshots = Lake(settings.data_dir).tables.read_table("player_snapshots", NIGHT)
    assert snapshots.column("filter_name").to_pylist() == ["sng"]


def _with_field(body: bytes, fmt: str) -> bytes:
    """The service starts sending a new tournament attribute and a new player element."""
    if fmt == "json":
        return body.replace(b'"@totalEntrants"', b'"@lateRegistration": "20m", "@totalEntrants"', 1).replace(
            b'"Statistics"', b'"Badges": {"@count": "3"}, "Statistics"', 1
        )
    return body.replace(b' totalEntrants="', b' lateRegistration="20m" totalEntrants="', 1).replace(
        b"<Statistics", b'<Badges count="3"/><Statistics', 1
    )


@pytest.mark.parametrize("fmt", ["json", "xml"])
def test_the_drift_check_warns_naming_fields_the_normaliser_does_not_map(sandbox, tmp_path: Path, fmt: str) -> None:
    settings = _settings(sandbox, tmp_path, format=fmt)
    sandbox.app.answer_rewrites[("PokerStars", "Borbas.Geri")] = _with_field
    try:
        definitions = build_definitions(TourneylakeResource.from_settings(settings), "0 3 * * *", first=NIGHT)
        with DagsterInstance.ephemeral() as instance:
            result = definitions.resolve_job_def("nightly").execute_in_process(partition_key=NIGHT.isoformat(), instance=instance)
    finally:
        del sandbox.app.answer_rewrites[("PokerStars", "Borbas.Geri")]
    assert result.success  # a warning, not a failure: the night is whole
    (drift,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "schema_drift"]
    assert not drift.passed and drift.severity.value == "WARN" and drift.metadata["unmapped"].value == 2
    fields = drift.metadata["fields"].value
    assert "Tournament@lateRegistration (kept in tournaments.extra)" in fields and "Player/Badges (in no table)" in fields
    tournaments = Lake(settings.data_dir).tables.read_table("tournaments", NIGHT)
    assert {"lateRegistration": "20m"} in [dict(e) for e in tournaments.column("extra").to_pylist() if e]


def test_the_freshness_check_fails_for_a_night_that_did_not_land(sandbox, tmp_path: Path) -> None:
    """The ``freshness`` job (its schedule at the deadline) checks the night due by then."""
    settings = _settings(sandbox, tmp_path, landed_by_hour_utc=6)
    definitions = build_definitions(TourneylakeResource.from_settings(settings), "0 3 * * *", first=date(2026, 11, 1))
    schedule = definitions.resolve_schedule_def("freshness_schedule")
    assert (schedule.cron_schedule, schedule.job_name, schedule.default_status.value) == ("0 6 * * *", "freshness", "RUNNING")
    # The night due by now: yesterday once today's 06:00 UTC has passed, else the night before.
    due = (datetime.now(UTC) - timedelta(hours=6)).date() - timedelta(days=1)
    with DagsterInstance.ephemeral() as instance:
        late = definitions.resolve_job_def("freshness").execute_in_process(instance=instance, raise_on_error=False)
        assert {e.asset_key.to_user_string(): e.passed for e in late.get_asset_check_evaluations()} == {
            "metadata": False,
            "player_summaries": False,
            "warehouse": False,
        }
        sandbox.world.set_today(due)
        try:
            night = definitions.resolve_job_def("nightly").execute_in_process(partition_key=due.isoformat(), instance=instance)
        finally:
            sandbox.world.set_today(NIGHT)
        assert night.success
        assert not night.get_asset_check_evaluations() or all(
            e.check_name != "night_landed" for e in night.get_asset_check_evaluations()
        )  # a night just made is not checked by its own run
        landed = definitions.resolve_job_def("freshness").execute_in_process(instance=instance)
        assert all(e.passed for e in landed.get_asset_check_evaluations())
        assert {e.metadata["night_due"].value for e in landed.get_asset_check_evaluations()} == {due.isoformat()}


def test_the_freshness_check_passes_while_no_night_is_due(sandbox, tmp_path: Path) -> None:
    """A lake whose first night is today owes no night yet, at any hour (Dagster's own check fails
    with an error of its own there: between midnight and the deadline when the first is yesterday)."""
    from tourneylake.pipelines.freshness import latest_deadline

    settings = _settings(sandbox, tmp_path, landed_by_hour_utc=6)
    today = datetime.now(UTC).date()
    definitions = build_definitions(TourneylakeResource.from_settings(settings), "0 3 * * *", first=today)
    with DagsterInstance.ephemeral() as instance:
        result = definitions.resolve_job_def("freshness").execute_in_process(instance=instance)
    evaluations = result.get_asset_check_evaluations()
    assert len(evaluations) == 3 and all(e.passed for e in evaluations)
    assert all(
        e.description == f"No night due yet: the first, {today}, is due by {today + timedelta(days=1)} 06:00 UTC."
        for e in evaluations
    )
    before, at = datetime(2026, 11, 21, 5, 59, tzinfo=UTC), datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
    assert latest_deadline(6, before) == datetime(2026, 11, 20, 6, 0, tzinfo=UTC)  # due then: the night of the 19th
    assert latest_deadline(6, at) == at  # due now: the night of the 20th
