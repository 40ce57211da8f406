"""Player summaries: the metered harvest, planned within the night's budget."""

from dagster import AssetCheckResult, AssetCheckSpec, AssetExecutionContext, MaterializeResult, MetadataValue, asset

from assets._metadata import night_of
from assets.partitions import SERVICE_POOL, nightly_partitions
from pipelines.resources import TourneylakeResource
from tourneylake.night import harvest_players, summarize_deferred

@asset(
    group_name="players",
    kinds={"python", "parquet"},
    partitions_def=nightly_partitions,
    pool=SERVICE_POOL,
    deps=["metadata"],
    # No retry policy: the harvest already retries each call, and re-running a night is free
    # for what was paid; a wrong password or an exhausted quota must not be hammered again.
    check_specs=[
        AssetCheckSpec("budget_respected", asset="player_summaries", description="Searches spent stay within the run cap and above the reserve."),
        AssetCheckSpec("no_failed_players", asset="player_summaries", description="Every planned player was harvested or deferred, none failed."),
    ],
    description="Filtered player summaries for the watchlist → player_* and tournament tables in the lake.",
)
def player_summaries(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
    settings = tourneylake.settings()
    outcome = harvest_players(tourneylake.night(night_of(context)), tourneylake.load_watchlist())
    cap_ok = settings.max_searches_per_run is None or outcome.searches_spent <= settings.max_searches_per_run
    reserve_ok = outcome.remaining_searches is None or outcome.remaining_searches >= settings.reserve_searches
    return MaterializeResult(
        metadata={
            "players_fetched": outcome.fetched,
            "players_reused_from_lake": outcome.reused,
            "searches_spent": outcome.searches_spent,
            "searches_left": outcome.remaining_searches,
            "deferred": len(outcome.deferred),
            "skipped": len(outcome.skipped),
            "failed": len(outcome.failed),
            "stopped_reason": outcome.stopped_reason or "none",
            "rows": sum(outcome.rows.values()),
            **{f"rows_{name}": count for name, count in sorted(outcome.rows.items())},
            "deferred_players": MetadataValue.md("\n".join(f"- {line}" for line in summarize_deferred(outcome.deferred[:50])) or "_none_"),
        },
        check_results=[
            AssetCheckResult(check_name="budget_respected", passed=cap_ok and reserve_ok, metadata={"spent": outcome.searches_spent}),
            AssetCheckResult(
                check_name="no_failed_players",
                passed=not outcome.failed,
                metadata={"failed": MetadataValue.md("\n".join(f"- {line}" for line in summarize_deferred(outcome.failed[:50])) or "_none_")},
            ),
        ],
    )
