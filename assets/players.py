"""Player summaries: the metered harvest, planned within the night's budget."""

from dagster import AssetCheckResult, AssetCheckSpec, AssetExecutionContext, MaterializeResult, MetadataValue, asset

from assets.partitions import SERVICE_POOL, nightly_partitions
from assets.report import fails_cleanly, listing, night_of
from assets.resource import TourneylakeResource
from tourneylake.harvest import harvest_players, target_lines


@asset(
    group_name="players",
    kinds={"python", "parquet"},
    partitions_def=nightly_partitions,
    pool=SERVICE_POOL,
    deps=["metadata"],
    # No retry policy: the harvest already retries each call, and re-running a night is free
    # for what was paid; a wrong password or an exhausted quota must not be hammered again.
    check_specs=[
        AssetCheckSpec(
            "budget_respected",
            asset="player_summaries",
            description="Searches spent stay within the run cap and above the reserve.",
        ),
        AssetCheckSpec(
            "no_failed_players",
            asset="player_summaries",
            description="Every planned (player, filter) pair was harvested or deferred, none failed: a failed one makes "
            "the night partial (`tourneylake run` exits 3); a re-run of the night retries it.",
        ),
    ],
    description="Filtered player summaries of the watchlist, anchored to the night → player_* and tournament tables in the lake.",
)
@fails_cleanly
def player_summaries(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
    settings = tourneylake.settings()
    outcome = harvest_players(tourneylake.session(night_of(context)), tourneylake.load_watchlist())
    cap_ok = settings.max_searches_per_run is None or outcome.searches_spent <= settings.max_searches_per_run
    reserve_ok = outcome.remaining_searches is None or outcome.remaining_searches >= settings.reserve_searches
    return MaterializeResult(
        metadata={
            "players_fetched": outcome.fetched,
            "players_reused_from_lake": outcome.reused,
            "searches_spent": outcome.searches_spent,
            "searches_left": outcome.remaining_searches,
            "searches_reconciled": outcome.reconciled,
            "deferred": len(outcome.deferred),
            "skipped": len(outcome.skipped),
            "failed": len(outcome.failed),
            "stopped_reason": outcome.stopped_reason or "none",
            "concurrency_settled": outcome.concurrency,
            "rows": sum(outcome.rows.values()),
            "deferred_players": listing(target_lines(outcome.deferred)),
            "skipped_players": listing(target_lines(outcome.skipped)),
            "failed_players": listing(target_lines(outcome.failed)),
            # Every failed pair, for the command line to name each one (failures are few).
            "failed_pairs": MetadataValue.json(target_lines(outcome.failed)),
            "filters_not_anchored": listing([f"{name}: {why}" for name, why in outcome.not_anchored.items()]),
        },
        check_results=[
            AssetCheckResult(
                check_name="budget_respected", passed=cap_ok and reserve_ok, metadata={"spent": outcome.searches_spent}
            ),
            AssetCheckResult(
                check_name="no_failed_players",
                passed=not outcome.failed,
                metadata={"failed": listing(target_lines(outcome.failed))},
            ),
        ],
    )
