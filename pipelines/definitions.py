"""The one ``Definitions``: assets, checks, the nightly and rebuild jobs, the nightly schedule."""

from __future__ import annotations

from datetime import date, timedelta

from dagster import (
    AssetSelection,
    Definitions,
    RunRequest,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    define_asset_job,
    job,
    load_assets_from_modules,
    schedule,
)

from assets import hands, players, reference, warehouse
from assets.partitions import nightly_partitions
from assets.rebuild import rebuild_night
from assets.resource import TourneylakeResource
from tourneylake.config import load_settings

ALL_ASSETS = load_assets_from_modules([reference, players, warehouse, hands])

nightly_job = define_asset_job(
    "nightly",
    selection=AssetSelection.groups("reference", "players", "warehouse"),
    description="One night: metadata, countries and news, player summaries within budget, then the warehouse.",
)

# Opt-in: hand analyses cost 5 searches each, so they run only when this job is launched.
hands_job = define_asset_job(
    "hands",
    selection=AssetSelection.groups("hands"),
    description="Analyse the hand histories dropped into inbox/hands/ (5 searches each, once per hand).",
)


@job(
    partitions_def=nightly_partitions,
    description="Rebuild nights from lake/_raw alone: every table of the night and the warehouse; no request, 0 searches.",
)
def rebuild() -> None:
    rebuild_night()


def nightly_schedule(cron: str) -> ScheduleDefinition:
    """The nightly schedule at ``cron`` (UTC; the setting ``TOURNEYLAKE_SCHEDULE_CRON``)."""

    @schedule(name="nightly_schedule", job=nightly_job, cron_schedule=cron, execution_timezone="UTC")
    def harvest_the_night_that_ended(context: ScheduleEvaluationContext) -> RunRequest:
        """Harvest the night that has just ended: the UTC day before the one the schedule fires in."""
        night: date = context.scheduled_execution_time.date() - timedelta(days=1)
        return RunRequest(run_key=night.isoformat(), partition_key=night.isoformat())

    return harvest_the_night_that_ended


def build_definitions(resource: TourneylakeResource, schedule_cron: str) -> Definitions:
    return Definitions(
        assets=ALL_ASSETS,
        jobs=[nightly_job, hands_job, rebuild],
        schedules=[nightly_schedule(schedule_cron)],
        resources={"tourneylake": resource},
    )


def __getattr__(name: str) -> Definitions:
    """``defs`` (what ``dagster dev`` loads, see workspace.yaml), built on first use from the
    environment: importing this module reads no setting, so ``tourneylake run``'s flags win."""
    if name == "defs":
        return build_definitions(TourneylakeResource.from_env(), load_settings().schedule_cron)
    raise AttributeError(name)
