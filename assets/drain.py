"""Use it or lose it: the ``drain`` job (and its schedule, off by default).

Spends the searches that would expire at the service's quota reset on the pairs owed to earlier
nights (:mod:`tourneylake.night.drain`: each pair into the night it is owed to, above the
reserve), then loads the nights it wrote into the warehouse.
Two ops, not assets: they make the owed nights' existing assets again. The first holds the
service's pool, the second the warehouse's.
"""

from datetime import UTC, date, datetime

from dagster import OpExecutionContext, op

from tourneylake.assets.pools import SERVICE_POOL, WAREHOUSE_POOL
from tourneylake.assets.resource import TourneylakeResource
from tourneylake.assets.steps import fails_cleanly, listing
from tourneylake.night.drain import drain


@op(pool=SERVICE_POOL, description="Spend the searches that expire at the next quota reset on the pairs owed to earlier nights.")
@fails_cleanly
def drain_backlog(context: OpExecutionContext, tourneylake: TourneylakeResource) -> list[str]:
    settings = tourneylake.settings()
    base_url = tourneylake.session(datetime.now(UTC).date()).base_url
    outcomes = drain(settings, tourneylake.load_watchlist(), base_url)
    fetched = {night for outcome in outcomes for night, done in outcome.nights.items() if done.fetched}
    context.add_output_metadata(
        {
            "quota_reset_at": outcomes[0].plan.quota.reset_at.isoformat() if outcomes else None,
            "spendable": sum(outcome.plan.spendable for outcome in outcomes),
            "kept_for_next_night": sum(outcome.plan.kept_for_night for outcome in outcomes),
            "held_back": listing(sorted({outcome.plan.held_back for outcome in outcomes if outcome.plan.held_back})),
            "owed_before": sum(outcome.plan.owed for outcome in outcomes),
            "players_fetched": sum(outcome.fetched for outcome in outcomes),
            "searches_spent": sum(outcome.searches_spent for outcome in outcomes),
            "still_owed": sum(outcome.still_owed for outcome in outcomes),
            "failed_players": listing([f"{target}: {why}" for outcome in outcomes for target, why in outcome.failed]),
        }
    )
    return sorted(night.isoformat() for night in fetched)


@op(pool=WAREHOUSE_POOL, description="Load the nights the drain wrote into the warehouse.")
@fails_cleanly
def load_drained_nights(context: OpExecutionContext, tourneylake: TourneylakeResource, nights: list[str]) -> None:
    lake = tourneylake.lake()
    with tourneylake.open_warehouse() as warehouse:
        for night in nights:
            warehouse.load_night(lake, date.fromisoformat(night))
    context.add_output_metadata({"nights_loaded": listing(nights)})
