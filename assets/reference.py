"""Reference data: metadata (with the night's currency rates), countries and news. All free."""

from dagster import (
    AssetExecutionContext,
    Backoff,
    MaterializeResult,
    RetryPolicy,
    asset,
)

from assets._metadata import night_of
from assets.partitions import SERVICE_POOL, nightly_partitions
from pipelines.resources import TourneylakeResource
from tourneylake.night import refresh_free_resource, refresh_metadata

# Free calls: a transient failure is worth another try a little later.
FREE_CALL_RETRY = RetryPolicy(max_retries=2, delay=2, backoff=Backoff.EXPONENTIAL)

@asset(
    group_name="reference",
    kinds={"python", "parquet"},
    partitions_def=nightly_partitions,
    pool=SERVICE_POOL,
    retry_policy=FREE_CALL_RETRY,
    description="Service metadata, fetched with our hash: downloaded only when it changed (rates refresh daily).",
)
def metadata(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
    outcome = refresh_metadata(tourneylake.night(night_of(context)))
    missing = outcome.currencies_without_rate
    return MaterializeResult(
        metadata={
            "metadata_hash": outcome.metadata_hash or "",
            "downloaded": outcome.downloaded,
            "rows": sum(outcome.rows.values()),
            **{f"rows_{name}": count for name, count in outcome.rows.items()},
            "currencies_without_rate": ", ".join(missing) or "none",
        },
    )

@asset(
    group_name="reference",
    kinds={"python", "parquet"},
    partitions_def=nightly_partitions,
    pool=SERVICE_POOL,
    retry_policy=FREE_CALL_RETRY,
    description="Countries the service recognises (free).",
)
def countries(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
    outcome = refresh_free_resource(tourneylake.night(night_of(context)), "countries")
    return MaterializeResult(
        metadata={"rows": outcome.rows, "warnings": "; ".join(outcome.warnings) or "none", "searches_left": outcome.remaining_searches}
    )

@asset(
    group_name="reference",
    kinds={"python", "parquet"},
    partitions_def=nightly_partitions,
    pool=SERVICE_POOL,
    retry_policy=FREE_CALL_RETRY,
    description="Product news from What's New (free).",
)
def news(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
    outcome = refresh_free_resource(tourneylake.night(night_of(context)), "news")
    return MaterializeResult(metadata={"rows": outcome.rows, "warnings": "; ".join(outcome.warnings) or "none"})
