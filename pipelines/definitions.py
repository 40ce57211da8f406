"""The one ``Definitions``: assets, checks, the nightly and rebuild jobs, the nightly schedule."""

from __future__ import annotations

from typing import Any

from dagster import (
    AssetSelection,
    Definitions,
    build_schedule_from_partitioned_job,
    define_asset_job,
    in_process_executor,
    job,
    load_assets_from_modules,
)

from assets import hands, players, reference, warehouse
from assets.partitions import nightly_partitions
from assets.rebuild import rebuild_night
from assets.resource import TourneylakeResource
from tourneylake.config import load_settings

ALL_ASSETS = load_assets_from_modules([reference, players, warehouse, hands])

# In-process: one night's steps share one process, so the resource and the built-in sandbox are
# set up once per run (under the multiprocess executor each step built its own: a one-night run
# from the UI took 85 s instead of 12 s). The steps are sequential anyway (each waits for the
# one before, and the service pool allows one at a time); the parallelism is inside the harvest.
nightly_job = define_asset_job(
    "nightly",
    selection=AssetSelection.groups("reference", "players", "warehouse"),
    executor_def=in_process_executor,
    description="One night: metadata, countries and news, player summaries within budget, then the warehouse.",
)

# Opt-in: hand analyses cost 5 searches each, so they run only when this job is launched.
hands_job = define_asset_job(
    "hands",
    selection=AssetSelection.groups("hands"),
    executor_def=in_process_executor,
    description="Analyse the hand histories dropped into inbox/hands/ (5 searches each, once per hand).",
)


@job(
    partitions_def=nightly_partitions,
    executor_def=in_process_executor,
    description="Rebuild nights from lake/_raw alone: every table of the night and the warehouse; no request, 0 searches.",
)
def rebuild() -> None:
    rebuild_night()


def nightly_schedule(cron: str) -> Any:
    """The nightly schedule at ``cron`` (a daily ``M H * * *`` in UTC: the setting
    ``TOURNEYLAKE_SCHEDULE_CRON``), built from the partitioned job: each tick asks for the last
    partition that has ended — the night that has just ended — and the UI shows the partition set."""
    minute, hour = (int(field) for field in cron.split()[:2])
    return build_schedule_from_partitioned_job(
        nightly_job, name="nightly_schedule", minute_of_hour=minute, hour_of_day=hour,
        description="Harvest the night that has just ended (the UTC day before the tick).",
    )  # fmt: skip


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
