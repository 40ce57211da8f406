"""The one ``Definitions``: assets, checks, the nightly and rebuild jobs, the nightly schedule."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from datetime import date
from typing import Any

from dagster import (
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetKey,
    AssetsDefinition,
    AssetSelection,
    DefaultSensorStatus,
    Definitions,
    EnvVar,
    ExecutorDefinition,
    Field,
    JobDefinition,
    PartitionsDefinition,
    SupersessionWarning,
    build_schedule_from_partitioned_job,
    build_sensor_for_freshness_checks,
    build_time_partition_freshness_checks,
    define_asset_job,
    definitions,
    in_process_executor,
    job,
    load_assets_from_modules,
    multi_or_in_process_executor,
)

from assets import hands, players, reference, warehouse
from assets.partitions import first_night, user_nights
from assets.players import account_assets
from assets.rebuild import rebuild_night
from assets.resource import SETTING_FIELDS, TourneylakeResource
from pipelines.failures import night_failed_sensor
from tourneylake.config import Settings, load_settings

ALL_ASSETS = load_assets_from_modules([reference, players, warehouse, hands])


def assets_for(accounts: list[str] | None = None) -> list[Any]:
    """Every asset: with several accounts, one harvest asset per account and the tables made
    from all of them in place of the one-account ``player_summaries`` (see ``assets.players``)."""
    if not accounts:
        return list(ALL_ASSETS)
    single = AssetKey("player_summaries")
    return [a for a in ALL_ASSETS if not (isinstance(a, AssetsDefinition) and single in a.keys)] + account_assets(accounts)


def nightly_executor(accounts: list[str] | None = None) -> ExecutorDefinition:
    """Dagster's in-process-or-multiprocess executor, defaulting to in-process for one account.

    In-process, a night's steps share one process, so the resource and the built-in sandbox are
    set up once per run and no step waits for a pool slot another step of the run holds: with
    one account the steps are sequential anyway (each waits for the one before; the parallelism
    is inside the harvest). With several accounts the default is multiprocess, so each
    account's harvest (its own step and pool) fetches beside the others. Either is chosen in the
    launchpad or run config (`execution: {config: {multiprocess: {max_concurrent: 4}}}`); the
    UI's "Materialize" takes the default. Celery, Docker or Kubernetes executors replace it in a
    deployment (README, "Beyond one machine")."""
    base = multi_or_in_process_executor
    default = "multiprocess" if accounts and len(accounts) > 1 else "in_process"
    return ExecutorDefinition(
        name=base.name,
        config_schema=Field(base.config_schema.config_type, default_value={default: {}}),
        requirements=base.get_requirements,
        executor_creation_fn=base.executor_creation_fn,
        description=f"In-process or multiprocess (default {default.replace('_', '-')}).",
    )


#: Run config that runs a night in-process whatever the default (`tourneylake run`'s settings
#: are handed over in this process, so its steps must run here).
IN_PROCESS: dict[str, Any] = {"execution": {"config": {"in_process": {}}}}


#: The night's assets whose partition must be in by ``TOURNEYLAKE_LANDED_BY_HOUR_UTC``.
LANDED = (AssetKey("metadata"), AssetKey("player_summaries"), AssetKey("warehouse"))


def freshness_checks(hour: int) -> Sequence[AssetChecksDefinition]:
    """A check per night's asset that its latest night is in by ``hour`` UTC the next day:
    evaluated by their sensor (``dagster dev``'s daemon), failing (an error) for a night that
    did not land in time."""
    # Dagster suggests a FreshnessPolicy instead; its cron policy asks for any materialisation
    # in the window (a rebuild of an old night would pass), these for the latest night itself.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SupersessionWarning)
        return build_time_partition_freshness_checks(
            assets=list(LANDED), deadline_cron=f"0 {hour} * * *", timezone="UTC", severity=AssetCheckSeverity.ERROR
        )


def freshness_sensor(checks: Sequence[AssetChecksDefinition]) -> Any:
    """The sensor that evaluates the freshness checks (running by default)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SupersessionWarning)
        return build_sensor_for_freshness_checks(freshness_checks=checks, default_status=DefaultSensorStatus.RUNNING)


def nightly(executor: ExecutorDefinition | None = None, without: Sequence[AssetChecksDefinition] = ()) -> Any:
    """The nightly job, on the Definitions' executor (:func:`nightly_executor`), or on
    ``executor`` (a deployment's: ``celery_executor``, ``docker_executor``,
    ``k8s_job_executor``), configured by the deployment's own run config. ``without``: checks
    its run leaves to their own sensor (freshness: a night just made is fresh)."""
    return define_asset_job(
        "nightly",
        selection=AssetSelection.groups("reference", "players", "warehouse") - AssetSelection.checks(*without),
        executor_def=executor,
        description="One night: metadata, countries and news, player summaries within budget, then the warehouse.",
    )


# Opt-in: hand analyses cost 5 searches each, so they run only when this job is launched.
hands_job = define_asset_job(
    "hands",
    selection=AssetSelection.groups("hands"),
    executor_def=in_process_executor,
    description="Analyse the hand histories dropped into inbox/hands/ (5 searches each, once per hand).",
)


def rebuild_job(partitions: PartitionsDefinition) -> JobDefinition:
    """Rebuild nights from the raw answers (one run per night; a range is a backfill)."""

    @job(
        name="rebuild",
        partitions_def=partitions,
        executor_def=in_process_executor,
        description="Rebuild nights from lake/_raw alone: every table of the night and the warehouse; no request, 0 searches.",
    )
    def rebuild() -> None:
        rebuild_night()

    return rebuild


def nightly_schedule(cron: str, job: Any) -> Any:
    """The nightly schedule at ``cron`` (a daily ``M H * * *`` in UTC: the setting
    ``TOURNEYLAKE_SCHEDULE_CRON``), built from the partitioned job: each tick asks for the last
    partition that has ended — the night that has just ended — and the UI shows the partition set."""
    minute, hour = (int(field) for field in cron.split()[:2])
    return build_schedule_from_partitioned_job(
        job, name="nightly_schedule", minute_of_hour=minute, hour_of_day=hour,
        description="Harvest the night that has just ended (the UTC day before the tick).",
    )  # fmt: skip


def build_definitions(
    resource: TourneylakeResource,
    schedule_cron: str,
    accounts: list[str] | None = None,
    *,
    executor: ExecutorDefinition | None = None,
    first: date | None = None,
) -> Definitions:
    """Everything Dagster loads. ``accounts``: the watchlist's (see :func:`assets_for`);
    ``executor``: the nightly job's, for a deployment beyond one machine (README); ``first``:
    the first night of the partitions (default: :func:`assets.partitions.first_night` of the
    resource's settings)."""
    settings = _settings_when_loaded(resource)
    first = first or first_night(settings)
    assets, partitions = user_nights(assets_for(accounts), first)
    fresh = freshness_checks(settings.landed_by_hour_utc)
    job = nightly(executor, fresh)
    return Definitions(
        assets=assets,
        asset_checks=fresh,
        jobs=[job, hands_job, rebuild_job(partitions)],
        schedules=[nightly_schedule(schedule_cron, job)],
        sensors=[
            night_failed_sensor,
            freshness_sensor(fresh),
        ],
        resources={"tourneylake": resource},
        executor=executor or nightly_executor(accounts),
    )


def _settings_when_loaded(resource: TourneylakeResource) -> Settings:
    """The settings a resource stands for as the definitions load: a resource bound to the
    environment (``EnvVar``, resolved only in a run) reads it now."""
    bound = any(isinstance(getattr(resource, name, None), EnvVar) for name in SETTING_FIELDS)
    return load_settings() if bound else resource.settings()


@definitions
def defs() -> Definitions:
    """What ``dagster dev`` loads (workspace.yaml), and ``dagster … -m pipelines.definitions``:
    built from the environment when the code location loads, not when this module is imported,
    so importing it reads no setting and ``tourneylake run``'s flags win."""
    settings = load_settings()
    return build_definitions(TourneylakeResource.from_env(), settings.schedule_cron, watchlist_accounts(settings))


def watchlist_accounts(settings: Settings) -> list[str]:
    """The names of the watchlist's accounts (none: the settings' one account)."""
    from tourneylake.night.watchlist import load_watchlist

    if not settings.watchlist.is_file():
        return []
    return [account.name for account in load_watchlist(settings.watchlist).accounts]
