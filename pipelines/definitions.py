"""The one ``Definitions``: assets, checks, the nightly job and its schedule."""

from __future__ import annotations

import os
from datetime import date

from dagster import (
    AssetSelection,
    Definitions,
    RunRequest,
    ScheduleEvaluationContext,
    define_asset_job,
    load_assets_from_modules,
    schedule,
)

from assets import hands, players, reference, warehouse
from pipelines.resources import TourneylakeResource

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

# UTC, configurable: TOURNEYLAKE_SCHEDULE_CRON (default 03:00 UTC).
NIGHTLY_CRON = os.environ.get("TOURNEYLAKE_SCHEDULE_CRON", "0 3 * * *")


@schedule(job=nightly_job, cron_schedule=NIGHTLY_CRON, execution_timezone="UTC")
def nightly_schedule(context: ScheduleEvaluationContext) -> RunRequest:
    """Harvest the night the schedule fires in (its UTC date)."""
    night: date = context.scheduled_execution_time.date()
    return RunRequest(run_key=night.isoformat(), partition_key=night.isoformat())


def build_definitions(resource: TourneylakeResource) -> Definitions:
    return Definitions(
        assets=ALL_ASSETS,
        jobs=[nightly_job, hands_job],
        schedules=[nightly_schedule],
        resources={"tourneylake": resource},
    )


defs = build_definitions(TourneylakeResource.from_env())
