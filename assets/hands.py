"""Hand analysis (opt-in): every hand history dropped into ``$TOURNEYLAKE_DATA_DIR/inbox/hands/``
is analysed once (5 searches each, subscribers only), within the run's budget.

Not part of the ``nightly`` job: it runs in its own ``hands`` job, so a watchlist harvest never
pays for hands nobody asked to analyse tonight.
"""

from dagster import AssetExecutionContext, MaterializeResult, asset

from tourneylake.assets.nights import nightly_partitions
from tourneylake.assets.pools import SERVICE_POOL
from tourneylake.assets.resource import TourneylakeResource
from tourneylake.assets.steps import fails_cleanly, listing, night_of
from tourneylake.hands import analyze_inbox, hands_dir, inbox_dir


@asset(
    group_name="hands",
    kinds={"python"},
    partitions_def=nightly_partitions,
    pool=SERVICE_POOL,
    # No retry policy: a quota or subscription refusal must not be hammered again, and a rerun
    # is free for every hand already analysed.
    description="Analyses of the hand histories in inbox/hands/ (5 searches each, once per hand) → hands/<sha256>.json.",
)
@fails_cleanly
def hand_analyses(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
    settings = tourneylake.settings()
    outcome = analyze_inbox(tourneylake.session(night_of(context)))
    if outcome.stopped_reason:
        context.log.warning(f"hand analysis stopped: {outcome.stopped_reason}")
    for name, why in outcome.failed:
        context.log.warning(f"hand {name} not analysed: {why}")
    return MaterializeResult(
        metadata={
            "analysed": len(outcome.analysed),
            "skipped": len(outcome.skipped),
            "deferred": len(outcome.deferred),
            "failed": len(outcome.failed),
            "searches_spent": outcome.searches_spent,
            **({} if outcome.remaining_searches is None else {"searches_left": outcome.remaining_searches}),
            "stopped_reason": outcome.stopped_reason or "none",
            "inbox": str(inbox_dir(settings)),
            "analyses_dir": str(hands_dir(settings)),
            "analysed_files": listing(outcome.analysed),
            "deferred_files": listing([f"{name}: {why}" for name, why in outcome.deferred]),
        },
    )
