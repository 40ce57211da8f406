"""Reference data: metadata (with the night's currency rates), countries and news. All free."""

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from dagster import AssetExecutionContext, MaterializeResult, RetryRequested, asset

from tourneylake.api import ApiError
from tourneylake.assets.nights import nightly_partitions
from tourneylake.assets.pools import SERVICE_POOL
from tourneylake.assets.resource import TourneylakeResource
from tourneylake.assets.steps import fails_cleanly, night_of
from tourneylake.night.harvest import refresh_free_resource, refresh_metadata

F = TypeVar("F", bound=Callable[..., Any])

#: Free calls that failed transiently (the client's own retries spent) are tried again this many
#: times, 4x then 8x the client's first backoff wait later (2 s, 4 s by default).
FREE_CALL_RETRIES = 2


def retried_when_transient(body: F) -> F:
    """A free call's step tried again when the service failed transiently, asked by the step
    itself (Dagster's ``RetryRequested``). Not a retry policy: Dagster retries an *interrupted*
    step that has one, so a Ctrl-C or a terminate from the UI during the night's first calls was
    tried again and the night went on. A wrong password or a data directory of another source
    is not retried either (``fails_cleanly``: errors tourneylake raises on purpose)."""

    @functools.wraps(body)
    def wrapper(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> Any:
        try:
            return body(context, tourneylake)
        except ApiError as exc:
            if not exc.retryable:
                raise
            wait = 4 * tourneylake.settings().retry_initial_wait_s * 2**context.retry_number
            raise RetryRequested(max_retries=FREE_CALL_RETRIES, seconds_to_wait=wait) from exc

    return wrapper  # type: ignore[return-value]


@asset(
    group_name="reference",
    kinds={"python", "parquet"},
    partitions_def=nightly_partitions,
    pool=SERVICE_POOL,
    description="Service metadata for the night, fetched with our hash: downloaded only when it changed (rates refresh daily).",
)
@retried_when_transient
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
    description="Countries the service recognises (free; once per night).",
)
@retried_when_transient
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
    description="Product news from What's New (free; once per night).",
)
@retried_when_transient
@fails_cleanly
def news(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
    outcome = refresh_free_resource(tourneylake.session(night_of(context)), "whats_new")
    return MaterializeResult(metadata={"rows": outcome.rows, "warnings": "; ".join(outcome.warnings) or "none"})
