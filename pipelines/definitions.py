"""The ``Definitions``: assets, checks, the nightly, models, drain, rebuild and freshness jobs,
their schedules, and the sensors (the models after a night, alerts).

Two code locations on one machine (``workspace.yaml``): ``tourneylake`` (:func:`defs`: the
nights, without the dbt models) and ``tourneylake_models`` (``tourneylake.pipelines.models``: the models,
the report and their job, with the sensor that runs it after each night). dagster-dbt and
dbt-core are slow to import, and every run launched from the UI is a new process that loads its
location: a night's run loads none of dbt. A deployment (``deploy/``) keeps one
location holding both (``with_models=True``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from dagster import (
    AssetChecksDefinition,
    AssetKey,
    AssetsDefinition,
    AssetSelection,
    DagsterRunStatus,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    Definitions,
    EnvVar,
    ExecutorDefinition,
    JobDefinition,
    JobSelector,
    PartitionsDefinition,
    RunRequest,
    RunsFilter,
    RunStatusSensorContext,
    ScheduleDefinition,
    SkipReason,
    build_schedule_from_partitioned_job,
    define_asset_job,
    definitions,
    in_process_executor,
    job,
    load_assets_from_modules,
    multiprocess_executor,
    run_status_sensor,
)

from tourneylake.assets import hands, players, reference, warehouse
from tourneylake.assets.drain import drain_backlog, load_drained_nights
from tourneylake.assets.nights import first_night, user_nights
from tourneylake.assets.players import account_assets
from tourneylake.assets.rebuild import rebuild_night
from tourneylake.assets.resource import SETTING_FIELDS, TourneylakeResource
from tourneylake.config import Settings, load_settings
from tourneylake.night.drain import drain_cron
from tourneylake.pipelines.failures import night_failed_sensor
from tourneylake.pipelines.freshness import freshness_checks, freshness_schedule

#: The assets of a night and the hands: what a night's run loads (no dbt).
NIGHT_ASSETS = load_assets_from_modules([reference, players, warehouse, hands])
# A night run with this tag has its models built by whoever ran it (`tourneylake run` builds
# them once, after its last night), so the sensor leaves it alone.
MODELS_TAG = "tourneylake/models"
BUILT_BY_RUN = "built_by_run"


@dataclass(frozen=True)
class Models:
    """The dbt models, their tests as checks, the report after them and the job that builds them."""

    assets: list[Any]
    checks: AssetSelection
    job: Any


@functools.cache
def model_definitions() -> Models:
    """The models' part of the Definitions, imported when first asked for: dagster-dbt imports
    dbt-core (about a second of a process's start), which a night's run does not need."""
    from tourneylake.assets import models, nightly_report

    checks = AssetSelection.checks(*models.dbt_models.check_keys)  # of the models and of the tables they read
    job = define_asset_job(
        "models",
        selection=AssetSelection.assets(models.dbt_models, nightly_report.nightly_report) | checks,
        executor_def=in_process_executor,
        description="Build the dbt models (views over the warehouse tables), run the dbt tests (asset checks), then write "
        "the latest night's report.",
    )
    return Models(list(load_assets_from_modules([models, nightly_report])), checks, job)


def assets_for(accounts: list[str] | None = None, *, with_models: bool = True) -> list[Any]:
    """Every asset (``with_models``: the dbt models and the report too): with several accounts,
    one harvest asset per account and the tables made from all of them in place of the
    one-account ``player_summaries`` (see ``tourneylake.assets.players``)."""
    every = [*NIGHT_ASSETS, *(model_definitions().assets if with_models else [])]
    if not accounts:
        return every
    single = AssetKey("player_summaries")
    return [a for a in every if not (isinstance(a, AssetsDefinition) and single in a.keys)] + account_assets(accounts)


def default_executor(accounts: list[str] | None = None) -> ExecutorDefinition:
    """Dagster's in-process executor for one account: a night's steps run one after another
    anyway (each needs the one before; the parallelism is inside the harvest), so one process
    sets up the resource and the built-in sandbox once per run, and no step waits for a pool
    slot another step of its run holds. Its multiprocess executor for several accounts, so each
    account's harvest (its own step and pool) fetches beside the others. Celery, Docker or
    Kubernetes executors replace it in a deployment (README, "Beyond one machine")."""
    return multiprocess_executor if accounts and len(accounts) > 1 else in_process_executor


def nightly(
    executor: ExecutorDefinition | None = None,
    without: Sequence[AssetChecksDefinition] = (),
    model_checks: AssetSelection | None = None,
    config: dict[str, Any] | None = None,
) -> Any:
    """The nightly job, on the Definitions' executor (:func:`default_executor`, or a
    deployment's: ``celery_executor``, ``docker_executor``, ``k8s_job_executor``), with
    ``config``, the deployment's run config, as its default (e.g. ``deploy/*/run_config.yaml``).
    ``without``: checks its run leaves to their own schedule
    (freshness: a night just made is fresh); ``model_checks``: the dbt tests, which run with the
    models."""
    leave = AssetSelection.checks(*without) | (model_checks or AssetSelection.checks())
    return define_asset_job(
        "nightly",
        selection=AssetSelection.groups("reference", "players", "warehouse") - leave,
        executor_def=executor,
        config=config,
        description="One night: metadata, countries and news, player summaries within budget, then the warehouse.",
    )


# Unpartitioned: the models are views over every night. A dbt build costs seconds (dbt starts,
# parses, creates each view, runs each test), so it runs once after a night's load (the
# ``models`` job of :func:`model_definitions`), not as a step of every night of a multi-night run.


def models_after(nightly_job: Any, models_job: Any) -> Any:
    """A sensor that builds the models once a night has loaded: after each successful
    ``nightly`` run (``nightly_job``: the job, or a ``JobSelector`` of it in another code
    location) but those tagged :data:`BUILT_BY_RUN`, and not while a ``models`` run is already
    waiting (it will read that night too: a backfill builds them once or twice, not once a night)."""

    @run_status_sensor(
        run_status=DagsterRunStatus.SUCCESS,
        monitored_jobs=[nightly_job],
        request_job=models_job,
        name="models_after_nightly",
        default_status=DefaultSensorStatus.RUNNING,
        description="Build the models after a night's load (views over the warehouse; their dbt tests as checks).",
    )
    def models_after_nightly(context: RunStatusSensorContext) -> RunRequest | SkipReason:
        if context.dagster_run.tags.get(MODELS_TAG) == BUILT_BY_RUN:
            return SkipReason(f"run {context.dagster_run.run_id} builds its models itself")
        waiting = RunsFilter(job_name="models", statuses=[DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED])
        if context.instance.get_runs_count(waiting):
            return SkipReason("a models run is already waiting")
        return RunRequest(run_key=f"models-after-{context.dagster_run.run_id}")

    return models_after_nightly


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


@job(
    executor_def=in_process_executor,
    description="Spend the searches that expire at the next quota reset on the pairs owed to earlier nights (each "
    "into its own night): what is left less the next scheduled night's plan and the reserve; then load those nights.",
)
def drain() -> None:
    load_drained_nights(drain_backlog())


def drain_schedule(cron: str) -> ScheduleDefinition:
    """The drain just before the quota reset (``TOURNEYLAKE_DRAIN_LEAD_MIN`` before it), off until
    turned on: a subscriber pays for the searches that expire either way, a pay-as-you-go account
    would not want them spent."""
    return ScheduleDefinition(
        name="drain_schedule",
        job=drain,
        cron_schedule=cron,
        execution_timezone="UTC",
        default_status=DefaultScheduleStatus.STOPPED,
        description="Before the quota reset: spend what would expire on the backlog of pairs owed (off by default).",
    )


def build_definitions(
    resource: TourneylakeResource,
    schedule_cron: str,
    accounts: list[str] | None = None,
    *,
    executor: ExecutorDefinition | None = None,
    executor_config: dict[str, Any] | None = None,
    first: date | None = None,
    drain_at: str | None = None,
    with_models: bool = True,
) -> Definitions:
    """Everything Dagster loads. ``accounts``: the watchlist's (see :func:`assets_for`);
    ``executor``: the nightly job's, for a deployment beyond one machine (``deploy/``), with
    ``executor_config``, its default run config; ``first``: the first night of the partitions
    (default: :func:`tourneylake.assets.nights.first_night` of the resource's settings); ``drain_at``:
    the drain schedule's cron (default: the settings'); ``with_models``: the dbt models, their
    job and sensor (a night's run of ``tourneylake run`` goes without: it does not import dbt)."""
    settings = _settings_when_loaded(resource)
    first = first or first_night(settings)
    assets, partitions = user_nights(assets_for(accounts, with_models=with_models), first)
    fresh = freshness_checks(settings.landed_by_hour_utc, first)
    models = model_definitions() if with_models else None
    job = nightly(executor, [fresh], models.checks if models else None, executor_config)
    resources: dict[str, Any] = {"tourneylake": resource}
    if models:
        from tourneylake.assets.models import dbt_resource

        resources["dbt"] = dbt_resource()
    return Definitions(
        assets=assets,
        asset_checks=[fresh],
        jobs=[job, hands_job, rebuild_job(partitions), drain, *([models.job] if models else [])],
        schedules=[
            nightly_schedule(schedule_cron, job),
            drain_schedule(drain_at or drain_cron(settings)),
            freshness_schedule(settings.landed_by_hour_utc, fresh),
        ],
        sensors=[night_failed_sensor, *([models_after(job, models.job)] if models else [])],
        resources=resources,
        executor=executor or default_executor(accounts),
    )


#: The nights' code location's name (workspace.yaml), whose nightly runs the models' sensor follows.
NIGHTS_LOCATION = "tourneylake"


def models_location(resource: TourneylakeResource) -> Definitions:
    """The models' code location beside the nights' (``tourneylake.pipelines.models``): the dbt models and
    their tests as checks, the report, the ``models`` job, and the sensor that runs it after each
    ``nightly`` run of the :data:`NIGHTS_LOCATION` location. The tables the models read are that
    location's assets: here they are the models' upstream keys, and Dagster joins the two graphs."""
    from tourneylake.assets.models import dbt_resource

    models = model_definitions()
    nightly_runs = JobSelector(location_name=NIGHTS_LOCATION, job_name="nightly")
    return Definitions(
        assets=models.assets,
        jobs=[models.job],
        sensors=[models_after(nightly_runs, models.job)],
        resources={"tourneylake": resource, "dbt": dbt_resource()},
    )


def _settings_when_loaded(resource: TourneylakeResource) -> Settings:
    """The settings a resource stands for as the definitions load: a resource bound to the
    environment (``EnvVar``, resolved only in a run) reads it now."""
    bound = any(isinstance(getattr(resource, name, None), EnvVar) for name in SETTING_FIELDS)
    return load_settings() if bound else resource.settings()


@definitions
def defs() -> Definitions:
    """What ``dagster dev`` loads (workspace.yaml), and ``dagster … -m tourneylake.pipelines.definitions``:
    built from the environment when the code location loads, not when this module is imported,
    so importing it reads no setting and ``tourneylake run``'s flags win. The nights without the
    models (those are ``tourneylake.pipelines.models``' location)."""
    return definitions_from_env(with_models=False)


def definitions_from_env(
    executor: ExecutorDefinition | None = None, executor_config: dict[str, Any] | None = None, *, with_models: bool = True
) -> Definitions:
    """The Definitions of the settings in the environment (``TOURNEYLAKE_*``, `.env`), the
    nightly job on ``executor`` when given (a deployment's, see :func:`build_definitions`)."""
    settings = load_settings()
    return build_definitions(
        TourneylakeResource.from_env(),
        settings.schedule_cron,
        watchlist_accounts(settings),
        executor=executor,
        executor_config=executor_config,
        drain_at=drain_cron(settings),
        with_models=with_models,
    )


def watchlist_accounts(settings: Settings) -> list[str]:
    """The names of the watchlist's accounts (none: the settings' one account)."""
    from tourneylake.night.watchlist import load_watchlist

    if not settings.watchlist.is_file():
        return []
    return [account.name for account in load_watchlist(settings.watchlist).accounts]
