"""The one ``Definitions``: assets, checks, the nightly, models and rebuild jobs, the nightly
schedule, and the sensor that builds the models after a night."""

from __future__ import annotations

from typing import Any

from dagster import (
    AssetKey,
    AssetsDefinition,
    AssetSelection,
    DagsterRunStatus,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    Definitions,
    ExecutorDefinition,
    RunRequest,
    RunsFilter,
    RunStatusSensorContext,
    ScheduleDefinition,
    SkipReason,
    build_schedule_from_partitioned_job,
    define_asset_job,
    in_process_executor,
    job,
    load_assets_from_modules,
    multi_or_in_process_executor,
    run_status_sensor,
)

from assets import hands, models, players, reference, warehouse
from assets.drain import drain_backlog, load_drained_nights
from assets.partitions import nightly_partitions
from assets.players import account_assets
from assets.rebuild import rebuild_night
from assets.resource import TourneylakeResource
from tourneylake.config import Settings, load_settings
from tourneylake.night.drain import drain_cron

ALL_ASSETS = load_assets_from_modules([reference, players, warehouse, hands, models])
# The dbt tests, checks of the models and of the tables they read: they run with the models.
MODEL_CHECKS = AssetSelection.checks(*models.dbt_models.check_keys)
# A night run with this tag has its models built by whoever ran it (`tourneylake run` builds
# them once, after its last night), so the sensor leaves it alone.
MODELS_TAG = "tourneylake/models"
BUILT_BY_RUN = "built_by_run"


def assets_for(accounts: list[str] | None = None) -> list[Any]:
    """Every asset: with several accounts, one harvest asset per account and the tables made
    from all of them in place of the one-account ``player_summaries`` (see ``assets.players``)."""
    if not accounts:
        return list(ALL_ASSETS)
    single = AssetKey("player_summaries")
    return [a for a in ALL_ASSETS if not (isinstance(a, AssetsDefinition) and single in a.keys)] + account_assets(accounts)


# In-process by default: one night's steps share one process, so the resource and the built-in
# sandbox are set up once per run (under the multiprocess executor each step builds its own: a
# one-night run from the UI took 85 s instead of 12 s). With one account the steps are
# sequential anyway (each waits for the one before); the parallelism is inside the harvest.
# With several accounts, the multiprocess executor fetches them side by side (each account's
# harvest is its own step, in its own pool): choose it in the launchpad or in run config
# (`execution: {config: {multiprocess: {max_concurrent: 4}}}`), or run on Celery, Docker or
# Kubernetes executors (README, "Beyond one machine").
IN_PROCESS: dict[str, Any] = {"execution": {"config": {"in_process": {}}}}


def nightly(executor: ExecutorDefinition | None = None, config: dict[str, Any] | None = None) -> Any:
    """The nightly job: in-process by default (multiprocess on request), or on ``executor``
    (a deployment's: ``celery_executor``, ``docker_executor``, ``k8s_job_executor``), configured
    by the deployment's own run config (``config``: its default, e.g. ``deploy/*/run_config.yaml``)."""
    return define_asset_job(
        "nightly",
        selection=AssetSelection.groups("reference", "players", "warehouse") - MODEL_CHECKS,
        executor_def=executor or multi_or_in_process_executor,
        config=config if executor else IN_PROCESS,
        description="One night: metadata, countries and news, player summaries within budget, then the warehouse.",
    )


nightly_job = nightly()

# Unpartitioned: the models are views over every night. A dbt build costs seconds (dbt starts,
# parses, creates each view, runs each test), so it runs once after a night's load, not as a
# step of every night of a multi-night run.
models_job = define_asset_job(
    "models",
    selection=AssetSelection.assets(models.dbt_models) | MODEL_CHECKS,
    executor_def=in_process_executor,
    description="Build the dbt models (views over the warehouse tables) and run the dbt tests (asset checks).",
)


def models_after(nightly_job: Any) -> Any:
    """A sensor that builds the models once a night has loaded: after each successful
    ``nightly`` run but those tagged :data:`BUILT_BY_RUN`, and not while a ``models`` run is
    already waiting (it will read that night too: a backfill builds them once or twice, not once
    a night)."""

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


@job(
    partitions_def=nightly_partitions,
    executor_def=in_process_executor,
    description="Rebuild nights from lake/_raw alone: every table of the night and the warehouse; no request, 0 searches.",
)
def rebuild() -> None:
    rebuild_night()


@job(
    executor_def=in_process_executor,
    description="Spend the searches that expire at the next quota reset on the pairs owed to earlier nights (each "
    "into its own night), above the reserve; then load those nights.",
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


def nightly_schedule(cron: str, job: Any = nightly_job) -> Any:
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
    executor_config: dict[str, Any] | None = None,
    drain_at: str | None = None,
) -> Definitions:
    """Everything Dagster loads. ``accounts``: the watchlist's (see :func:`assets_for`);
    ``executor``: the nightly job's, for a deployment beyond one machine (``deploy/``), with
    ``executor_config``, its default run config; ``drain_at``: the drain schedule's cron (the
    settings' defaults' when not given: no variable is read here)."""
    job = nightly(executor, executor_config) if executor else nightly_job
    return Definitions(
        assets=assets_for(accounts),
        jobs=[job, models_job, hands_job, rebuild, drain],
        schedules=[nightly_schedule(schedule_cron, job), drain_schedule(drain_at or drain_cron(Settings.model_construct()))],
        sensors=[models_after(job)],
        resources={"tourneylake": resource, "dbt": models.dbt_resource()},
    )


def __getattr__(name: str) -> Definitions:
    """``defs`` (what ``dagster dev`` loads, see workspace.yaml), built on first use from the
    environment: importing this module reads no setting, so ``tourneylake run``'s flags win."""
    if name == "defs":
        return definitions_from_env()
    raise AttributeError(name)


def definitions_from_env(
    executor: ExecutorDefinition | None = None, executor_config: dict[str, Any] | None = None
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
    )


def watchlist_accounts(settings: Settings) -> list[str]:
    """The names of the watchlist's accounts (none: the settings' one account)."""
    from tourneylake.night.watchlist import load_watchlist

    if not settings.watchlist.is_file():
        return []
    return [account.name for account in load_watchlist(settings.watchlist).accounts]
