"""Operating it every night, in Dagster: partitions from the user's first night, backfills too
large to pay for refused before a search, the watchlist's mistakes, freshness and drift
checks, the numbers Dagster plots, alerts. Real materialisations against the sandbox."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance

from assets.resource import TourneylakeResource
from pipelines.definitions import build_definitions
from tests.helpers import player_line, remaining, sandbox_settings, write_watchlist
from tourneylake.lake.lake import Lake

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
    from assets.partitions import first_night

    empty = _settings(sandbox, tmp_path / "empty")
    resource = TourneylakeResource.from_settings(empty)
    assert first_night(empty) == datetime.now(UTC).date() - timedelta(days=1)  # an empty lake: yesterday
    Lake(empty.data_dir).write_raw(date(2026, 11, 12), "countries", {"k": "v"}, b"{}", "json", time.time())
    graph = build_definitions(resource, "0 3 * * *").resolve_asset_graph()
    keys = graph.get(AssetKey("player_summaries")).partitions_def.get_partition_keys()
    assert keys[0] == "2026-11-12"
    chosen = empty.with_overrides(first_night="2026-11-18")
    job = build_definitions(TourneylakeResource.from_settings(chosen), "0 3 * * *").resolve_job_def("rebuild")
    assert job.partitions_def.get_partition_keys()[0] == "2026-11-18"


def test_a_backfill_of_more_nights_than_allowed_is_refused_before_a_search(sandbox, tmp_path: Path) -> None:
    from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill

    settings = _settings(sandbox, tmp_path, max_backfill_nights=2)
    definitions = build_definitions(TourneylakeResource.from_settings(settings), "0 3 * * *", first=date(2026, 11, 1))
    nights = ["2026-11-18", "2026-11-19", "2026-11-20"]
    before = remaining(settings)
    with DagsterInstance.ephemeral() as instance:
        backfill = PartitionBackfill.from_asset_partitions(
            backfill_id="toolarge",
            asset_graph=definitions.resolve_asset_graph(),
            partition_names=nights,
            asset_selection=[AssetKey("player_summaries")],
            backfill_timestamp=time.time(),
            tags={},
            dynamic_partitions_store=instance,
            all_partitions=False,
            title=None,
            description=None,
            run_config=None,
        )
        instance.add_backfill(backfill)
        result = definitions.resolve_job_def("nightly").execute_in_process(
            partition_key=nights[-1], instance=instance, tags={"dagster/backfill": "toolarge"}, raise_on_error=False
        )
        assert not result.success
        (failure,) = [e for e in result.all_events if e.is_step_failure]
        message = failure.step_failure_data.error.message
        assert "a backfill of 3 nights is refused" in message and "TOURNEYLAKE_MAX_BACKFILL_NIGHTS=2" in message
        assert instance.get_backfill("toolarge").status == BulkActionStatus.CANCELING
    assert remaining(settings) == before  # not a search
    assert not Lake(settings.data_dir).partitions("player_snapshots")


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
