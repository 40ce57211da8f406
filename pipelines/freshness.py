"""Freshness: the night's assets landed by ``TOURNEYLAKE_LANDED_BY_HOUR_UTC`` the next day.

One ``night_landed`` check per asset of :data:`LANDED`: the night due by the latest deadline
(the deadline at hour H on day D asks for night D-1) is materialised, failing (an error) when it
is not. A lake whose first night is not due yet passes, saying when it is (Dagster's
``build_time_partition_freshness_checks`` fails with an error of its own there: a new user's
first hours). Dagster's freshness policies ask for any materialisation in a window (a rebuild of
an old night would pass); this asks for the latest night itself. The ``freshness`` job runs the
checks, its schedule at each deadline.
"""

# No `from __future__ import annotations`: Dagster reads the check's `context` annotation as a type.
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    AssetRecordsFilter,
    AssetSelection,
    DefaultScheduleStatus,
    ScheduleDefinition,
    define_asset_job,
    in_process_executor,
    multi_asset_check,
)

__all__ = ["LANDED", "freshness_checks", "freshness_schedule", "latest_deadline"]

#: The night's assets whose partition must be in by ``TOURNEYLAKE_LANDED_BY_HOUR_UTC``.
LANDED = (AssetKey("metadata"), AssetKey("player_summaries"), AssetKey("warehouse"))


def latest_deadline(hour: int, now: datetime) -> datetime:
    """The last deadline (``hour``:00 UTC) at or before ``now``."""
    today = now.astimezone(UTC).replace(hour=hour, minute=0, second=0, microsecond=0)
    return today if now >= today else today - timedelta(days=1)


def freshness_checks(hour: int, first: date) -> AssetChecksDefinition:
    """A check per asset of :data:`LANDED` that its night due by ``hour`` UTC is in; ``first``:
    the user's first night (none is due before it has ended and its deadline passed)."""
    specs = [
        AssetCheckSpec(
            "night_landed",
            asset=key,
            description=f"The night due by {hour:02d}:00 UTC (the night before) has landed.",
        )
        for key in LANDED
    ]

    @multi_asset_check(specs=specs, can_subset=True, name="night_landed")
    def night_landed(context: AssetCheckExecutionContext) -> Iterator[AssetCheckResult]:
        deadline = latest_deadline(hour, datetime.now(UTC))
        due = deadline.date() - timedelta(days=1)
        metadata = {"night_due": due.isoformat(), "deadline": f"{deadline:%Y-%m-%d %H:%M} UTC"}
        for check_key in context.selected_asset_check_keys:
            key = check_key.asset_key
            if due < first:
                yield AssetCheckResult(
                    asset_key=key,
                    check_name=check_key.name,
                    passed=True,
                    description=f"No night due yet: the first, {first}, is due by {first + timedelta(days=1)} {hour:02d}:00 UTC.",
                    metadata={**metadata, "night_due": "none"},
                )
                continue
            found = context.instance.fetch_materializations(AssetRecordsFilter(key, asset_partitions=[due.isoformat()]), limit=1)
            landed = bool(found.records)
            yield AssetCheckResult(
                asset_key=key,
                check_name=check_key.name,
                passed=landed,
                severity=AssetCheckSeverity.ERROR,
                description=f"The night of {due} landed."
                if landed
                else f"The night of {due} was due by {deadline:%Y-%m-%d %H:%M} UTC and has not landed.",
                metadata=metadata,
            )

    return night_landed


def freshness_schedule(hour: int, checks: AssetChecksDefinition) -> ScheduleDefinition:
    """The ``freshness`` job (the checks alone, in one process) at each deadline (running by default)."""
    job = define_asset_job(
        "freshness",
        selection=AssetSelection.checks(checks),
        executor_def=in_process_executor,
        description="Check that the night due by the deadline has landed.",
    )
    return ScheduleDefinition(
        name="freshness_schedule",
        job=job,
        cron_schedule=f"0 {hour} * * *",
        execution_timezone="UTC",
        default_status=DefaultScheduleStatus.RUNNING,
        description="At the deadline: has the night just due landed?",
    )
