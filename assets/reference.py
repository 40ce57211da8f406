"""Reference data: metadata (with the night's currency rates), countries and news. All free."""

from dagster import AssetExecutionContext, Backoff, MaterializeResult, RetryPolicy, asset

from assets.partitions import SERVICE_POOL, nightly_partitions
from assets.report import fails_cleanly, night_of
from assets.resource import TourneylakeResource
from tourneylake.night.harvest import refresh_free_resource, refresh_metadata

# Free calls: a transient failure is worth another try a little later (a wrong password or a
# data directory of another source is not: those are errors tourneylake raises on purpose, and
# Dagster retries only what the policy is given, so the policy stays on free transient calls).
FREE_CALL_RETRY = RetryPolicy(max_retries=2, delay=2, backoff=Backoff.EXPONENTIAL)


@asset(
    group_name="reference",
    kinds={"python", "parquet"},
    partitions_def=nightly_partitions,
    pool=SERVICE_POOL,
    retry_policy=FREE_CALL_RETRY,
    description="Service metadata for the night, fetched with our hash: downloaded only when it changed (rates refresh daily).",
)
@fails_cleanly
def metadata(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
    outcome = refresh_metadata(tourneylake.session(night_of(context)))
    return MaterializeResult(
        metadata={
            "metadata_hash": outcome.metadata_hash or "",
            "downloaded": outcome.downloaded,
            "called": outcome.called,
            "rows": sum(outcome.rows.values()),
            "currencies_without_rate": ", ".join(outcome.currencies_without_rate) or "none",
        },
    )


@asset(
    group_name="reference",
    kinds={"python", "parquet"},
    partitions_def=nightly_partitions,
    pool=SERVICE_POOL,
    retry_policy=FREE_CALL_RETRY,
    description="Countries the service recognises (free; once per night).",
)
@fails_cleanly
def countries(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
    outcome = refresh_free_resource(tourneylake.session(night_of(context)), "countries")
    left = {} if outcome.remaining_searches is None else {"searches_left": outcome.remaining_searches}
    return MaterializeResult(metadata={"rows": outcome.rows, "warnings": "; ".join(outcome.warnings) or "none", **left})


@asset(
    group_name="reference",
    kinds={"python", "parquet"},
    partitions_def=nightly_partitions,
    pool=SERVICE_POOL,
    retry_policy=FREE_CALL_RETRY,
    description="Product news from What's New (free; once per night).",
)
@fails_cleanly
def news(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
    outcome = refresh_free_resource(tourneylake.session(night_of(context)), "whats_new")
    return MaterializeResult(metadata={"rows": outcome.rows, "warnings": "; ".join(outcome.warnings) or "none"})
