"""Freshness: the night's assets landed by ``TOURNEYLAKE_LANDED_BY_HOUR_UTC`` the next day.

One check per asset of :data:`LANDED` that the night due by the latest deadline (the deadline at
hour H on day D asks for night D-1) is materialised, failing (an error) when it is not, and the
sensor that evaluates them from ``dagster dev``'s daemon. Dagster's
``build_time_partition_freshness_checks`` asks the same, but fails with an error of its own
("Expected non-None value") while no night is due yet: between midnight and the deadline on a lake
whose first night is yesterday, a new user's first hours. Here that case passes, saying when the
first night is due. The check keeps Dagster's name, parameters and metadata (when it is fresh
until, the deadline it judged), so Dagster's freshness sensor and UI read it as theirs.
"""

# No `from __future__ import annotations`: Dagster reads the check's `context` annotation as a type.
import warnings
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetKey,
    DefaultSensorStatus,
    JsonMetadataValue,
    MetadataValue,
    SupersessionWarning,
    TimestampMetadataValue,
    TimeWindowPartitionsDefinition,
    build_sensor_for_freshness_checks,
)
from dagster._core.definitions.asset_checks.asset_check_factories.utils import (
    DEADLINE_CRON_PARAM_KEY,
    FRESH_UNTIL_METADATA_KEY,
    LATEST_CRON_TICK_METADATA_KEY,
    TIMEZONE_PARAM_KEY,
    freshness_multi_asset_check,
    retrieve_last_update_record,
)
from dagster._utils.schedules import get_latest_completed_cron_tick, get_next_cron_tick

__all__ = ["LANDED", "freshness_checks", "freshness_sensor"]

#: The night's assets whose partition must be in by ``TOURNEYLAKE_LANDED_BY_HOUR_UTC``.
LANDED = (AssetKey("metadata"), AssetKey("player_summaries"), AssetKey("warehouse"))


def freshness_checks(hour: int) -> Sequence[AssetChecksDefinition]:
    """A check per asset of :data:`LANDED` that its night due by ``hour`` UTC is in (see the
    module's docstring)."""
    # Dagster suggests a FreshnessPolicy instead; its cron policy asks for any materialisation
    # in the window (a rebuild of an old night would pass), these for the latest night itself.
    cron = f"0 {hour} * * *"
    params = JsonMetadataValue({TIMEZONE_PARAM_KEY: "UTC", DEADLINE_CRON_PARAM_KEY: cron})

    @freshness_multi_asset_check(params_metadata=params, asset_keys=list(LANDED), blocking=False)
    def night_landed(context: AssetCheckExecutionContext) -> Iterator[AssetCheckResult]:
        now = datetime.now(UTC)
        deadline = get_latest_completed_cron_tick(cron, now, "UTC")
        fresh_until = get_next_cron_tick(cron, now, "UTC")
        due = deadline.date() - timedelta(days=1)
        for check_key in context.selected_asset_check_keys:
            nights = context.job_def.asset_layer.asset_graph.get(check_key.asset_key).partitions_def
            assert isinstance(nights, TimeWindowPartitionsDefinition), f"{check_key.asset_key} is not partitioned by night"
            metadata: dict[str, MetadataValue] = {LATEST_CRON_TICK_METADATA_KEY: TimestampMetadataValue(deadline.timestamp())}
            first = nights.start.date()
            if due < first:  # no night due yet: the first is due at the next deadline after it ends
                metadata[FRESH_UNTIL_METADATA_KEY] = TimestampMetadataValue(fresh_until.timestamp())
                yield AssetCheckResult(
                    asset_key=check_key.asset_key,
                    passed=True,
                    description=f"No night due yet: the first, {first}, is due by {first + timedelta(days=1)} {hour:02d}:00 UTC.",
                    metadata=metadata,
                )
                continue
            landed = retrieve_last_update_record(context.instance, check_key.asset_key, due.isoformat()) is not None
            if landed:
                metadata[FRESH_UNTIL_METADATA_KEY] = TimestampMetadataValue(fresh_until.timestamp())
            yield AssetCheckResult(
                asset_key=check_key.asset_key,
                passed=landed,
                severity=AssetCheckSeverity.ERROR,
                description=(
                    f"The night of {due} landed."
                    if landed
                    else f"The night of {due} was due by {deadline:%Y-%m-%d %H:%M} UTC and has not landed."
                ),
                metadata=metadata,
            )

    return [night_landed]


def freshness_sensor(checks: Sequence[AssetChecksDefinition]) -> Any:
    """The sensor that evaluates the freshness checks (running by default)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SupersessionWarning)
        return build_sensor_for_freshness_checks(freshness_checks=checks, default_status=DefaultSensorStatus.RUNNING)
