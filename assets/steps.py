"""What the asset and op bodies share: a step's night, a listing for its metadata, failures a retry cannot change."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import date
from typing import Any, TypeVar

from dagster import AssetExecutionContext, Failure, MetadataValue, OpExecutionContext

from tourneylake.api import ApiError
from tourneylake.errors import TourneylakeError

F = TypeVar("F", bound=Callable[..., Any])

LISTED = 50  # lines of a listing shown in the UI; the rest are counted
# Which process runs a night in-process (`tourneylake run`), so that a later run can tell a dead
# one from a live one, a step whether it runs in that process, and the sensor that the command
# line has told the user itself.
HOST_TAG, PID_TAG = "tourneylake/host", "tourneylake/pid"


def night_of(context: AssetExecutionContext | OpExecutionContext) -> date:
    return date.fromisoformat(context.partition_key)


def listing(lines: Sequence[str]) -> MetadataValue:
    """A markdown list of at most :data:`LISTED` lines, and how many more there are."""
    shown = [f"- {line}" for line in lines[:LISTED]]
    if len(lines) > LISTED:
        shown.append(f"- … and {len(lines) - LISTED} more")
    return MetadataValue.md("\n".join(shown) or "_none_")


def fails_cleanly(body: F) -> F:
    """An asset or op body whose deliberate failures end the step with one clear line.

    Errors tourneylake raises on purpose that another try cannot change — wrong credentials, a
    data directory of another source, a bad watchlist or setting, a damaged lake file, a quota
    stop — become a :class:`dagster.Failure` that is never retried (the retry policy of the free
    calls is for transient failures only). Transient service errors and bugs propagate as they are."""

    @functools.wraps(body)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return body(*args, **kwargs)
        except TourneylakeError as exc:
            if isinstance(exc, ApiError) and exc.retryable:
                raise
            raise Failure(description=" ".join(str(exc).split()), allow_retries=False) from None

    return wrapper  # type: ignore[return-value]
