"""Run one night in-process through Dagster — the same job the schedule runs — and report it.

``tourneylake run`` (``pipelines/cli.py``) calls :func:`run_night` for each night, then
:func:`run_models` once (the ``models`` job: dagster-dbt's ``dbt build`` of the views and their
tests, after the last night rather than after each). It lives here, not in the library, because
it drives Dagster. The report is plain data; the CLI renders it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from dagster import AssetKey, DagsterInstance, JobDefinition, build_reconstructable_job, execute_job
from pydantic import SecretStr

from tourneylake.assets.nights import first_night
from tourneylake.assets.pools import SERVICE_POOL, WAREHOUSE_POOL
from tourneylake.assets.resource import TourneylakeResource
from tourneylake.assets.steps import HOST_TAG, PID_TAG
from tourneylake.config import ENV_PREFIX, Settings, load_settings
from tourneylake.errors import ConfigError
from tourneylake.night.alerts import night_failed
from tourneylake.night.drain import drain_cron
from tourneylake.night.endpoint import connect
from tourneylake.packaged import packaged
from tourneylake.pipelines.definitions import BUILT_BY_RUN, MODELS_TAG, build_definitions, models_location, watchlist_accounts
from tourneylake.pipelines.failures import failure_line, interrupted

log = logging.getLogger(__name__)

#: The nightly report's asset (``tourneylake.assets.nightly_report``), left out of a one-off run's models.
REPORT_KEY = AssetKey("nightly_report")

# Dagster's console logger stays quiet: the command line prints the run's outcome itself (one
# line for a failure); the events, stack traces included, are in the instance for the UI.
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


@contextlib.contextmanager
def run_instance() -> Iterator[DagsterInstance]:
    """The instance a run records into: ``$DAGSTER_HOME``'s when it is set (``make run``, a
    project's ``dagster_home``: the runs show in ``dagster dev``, and its pools serialise
    overlapping runs on one account), else a throwaway one for the block."""
    home = os.environ.get("DAGSTER_HOME")
    with home_instance(home) if home else DagsterInstance.ephemeral() as instance:
        yield instance


def home_instance(home: str) -> DagsterInstance:
    """``DAGSTER_HOME``'s instance. A folder without a ``dagster.yaml`` is given the one
    ``tourneylake init`` writes (the pools, no telemetry), said in one line, rather than
    Dagster's defaults with their warning, telemetry notice and welcome banner before the
    night's first line (and ``dagster dev`` on that folder then finds the same instance)."""
    folder = Path(home)
    if not folder.is_dir():
        raise ConfigError(f"DAGSTER_HOME={home} is not a folder: make it (`tourneylake init` writes one), or unset DAGSTER_HOME")
    settings = folder / "dagster.yaml"
    if not settings.exists():
        try:
            with settings.open("xb") as out:  # never over one written meanwhile
                out.write(packaged("templates/dagster.yaml").read_bytes())
        except FileExistsError:
            pass
        except OSError as exc:
            raise ConfigError(
                f"DAGSTER_HOME={home} has no dagster.yaml and none can be written there: {exc.strerror or exc}"
            ) from None
        else:
            log.info("DAGSTER_HOME had no dagster.yaml: wrote tourneylake's instance settings there (%s)", settings)
    return DagsterInstance.get()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def release_dead_runs(instance: DagsterInstance) -> list[str]:
    """Free the pool slots held by in-process runs of this host whose process died (``kill -9``
    in the middle of a step): Dagster frees a slot when its step ends, which a killed process
    never does, so the next run would wait for it forever. Returns the run ids released."""
    released = []
    for pool in (SERVICE_POOL, WAREHOUSE_POOL):
        for slot in instance.event_log_storage.get_concurrency_info(pool).claimed_slots:
            run = instance.get_run_by_id(slot.run_id)
            pid = run.tags.get(PID_TAG) if run is not None else None
            if run is None or pid is None or run.tags.get(HOST_TAG) != socket.gethostname() or _alive(int(pid)):
                continue
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
            if not run.is_finished:
                instance.report_run_failed(run, f"the process running it (pid {pid}) died; its pool slots were freed")
            released.append(run.run_id)
    return released


@dataclass
class RunReport:
    night: date | None  # None: the models job (every night)
    success: bool
    failure: str | None
    duration_s: float
    assets: dict[str, dict[str, Any]] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)
    run_id: str = ""
    interrupted: bool = False  # stopped by Ctrl-C (or SIGINT): every answer paid for is kept

    def value(self, asset: str, key: str, default: Any = None) -> Any:
        return self.assets.get(asset, {}).get(key, default)


def run_night(settings: Settings, night: date, *, sandbox_seed: int = 7) -> RunReport:
    """The nightly job for ``night``, in-process; its models are left to :func:`run_models`."""
    return _execute(settings, "nightly", night, sandbox_seed=sandbox_seed)


def run_models(settings: Settings, *, report: bool = True) -> RunReport:
    """The ``models`` job, in process: every dbt model built on the warehouse, every test run,
    then the report (``report=False``: not the report, which follows the project's watchlist, not
    a one-off run's). dagster-dbt echoes dbt's log to standard output and its progress to the
    ``dagster.builtin`` logger: both stay in the run's event log (the UI), out of the command's
    output."""
    echo = logging.getLogger("dagster.builtin")  # its level is the instance's `python_log_level` in a run
    echo.addFilter(_warnings_only)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return _execute(settings, "models", None, without=() if report else (REPORT_KEY,))
    finally:
        echo.removeFilter(_warnings_only)


def _warnings_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING


def _execute(
    settings: Settings, job_name: str, night: date | None, *, sandbox_seed: int = 7, without: tuple[AssetKey, ...] = ()
) -> RunReport:
    accounts = watchlist_accounts(settings)
    first = min(first_night(settings), night) if night else first_night(settings)  # any night the service has data for
    if job_name == "nightly" and night is not None and side_by_side(settings, accounts):
        return _execute_side_by_side(settings, night, accounts, first, sandbox_seed=sandbox_seed)
    resource = TourneylakeResource.from_settings(settings, sandbox_seed=sandbox_seed)
    if job_name == "models":  # the models' code location: a night's run does not import dbt
        definitions = models_location(resource)
    else:
        definitions = build_definitions(
            resource, settings.schedule_cron, accounts, drain_at=drain_cron(settings), first=first, with_models=False
        )
    job = definitions.resolve_job_def(job_name)
    selection = None
    if without:  # the job's assets but those (the other location's tables it reads are not the job's to run)
        selection = [
            key
            for key in definitions.resolve_asset_graph().get_all_asset_keys()
            if key not in without and definitions.resolve_assets_def(key).is_executable
        ]
    started = time.perf_counter()
    with run_instance() as instance:
        for run_id in release_dead_runs(instance):
            log.warning("freed the pool slots of run %s: its process died", run_id)
        result = job.execute_in_process(
            partition_key=night.isoformat() if night else None,
            instance=instance,
            raise_on_error=False,
            run_config=QUIET_LOGS,
            tags=_tags(),
            asset_selection=selection,
        )
        report = _report(settings, job_name, night, result)
    report.duration_s = time.perf_counter() - started
    return report


def _tags() -> dict[str, str]:
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid()), MODELS_TAG: BUILT_BY_RUN}


def side_by_side(settings: Settings, accounts: list[str]) -> bool:
    """Whether ``tourneylake run`` harvests the accounts side by side (see ``account_workers``)."""
    return len(accounts) > 1 and settings.account_workers != 1


def nightly_job(accounts: list[str], first: str) -> JobDefinition:
    """The nights' nightly job for ``accounts`` from night ``first`` (ISO), its settings from the
    environment: what each step's process of :func:`_execute_side_by_side` loads again."""
    settings = load_settings()
    return build_definitions(
        TourneylakeResource.from_env(),
        settings.schedule_cron,
        accounts,
        drain_at=drain_cron(settings),
        first=date.fromisoformat(first),
        with_models=False,
    ).resolve_job_def("nightly")


def reconstructable_nightly(accounts: list[str], first: date) -> Any:
    """:func:`nightly_job` as each step's process loads it (Dagster keeps the last job it loaded
    by its pointer, here named with its accounts and first night: other accounts, another job)."""
    return build_reconstructable_job(
        "tourneylake.pipelines.nightly", "nightly_job", reconstructable_kwargs={"accounts": accounts, "first": first.isoformat()}
    )


def _execute_side_by_side(settings: Settings, night: date, accounts: list[str], first: date, *, sandbox_seed: int) -> RunReport:
    """The nightly job on Dagster's multiprocess executor (the Definitions' for several
    accounts): every step in a process of its own (Dagster's default start, a fresh interpreter), the accounts' harvests side by side (each in
    its own pool). Each step's process builds the job again (:func:`nightly_job`, from this run's
    accounts and first night: a job of other accounts is another job) and reads its settings
    from ``TOURNEYLAKE_*`` variables, set here for the run's processes (secrets included: they
    stay in this process tree's environment, never in run config or the event log). The
    built-in sandbox, when asked for, is started here once and every step calls it by its URL."""
    workers = min(len(accounts), settings.account_workers or 16)
    started = time.perf_counter()
    with ExitStack() as stack:
        endpoint = stack.enter_context(connect(settings, today=night, seed=sandbox_seed))
        with_first = settings.model_copy(update={"first_night": first})
        stack.enter_context(_environment(settings_environment(with_first, base_url=endpoint.base_url)))
        if os.environ.get("DAGSTER_HOME"):
            instance = stack.enter_context(home_instance(os.environ["DAGSTER_HOME"]))
        else:  # a throwaway instance on disk: the steps' processes share it
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="tourneylake-dagster-"))
            instance = stack.enter_context(DagsterInstance.local_temp(folder, overrides={"telemetry": {"enabled": False}}))
        for run_id in release_dead_runs(instance):
            log.warning("freed the pool slots of run %s: its process died", run_id)
        job = reconstructable_nightly(accounts, first)
        run_config = {"execution": {"config": {"max_concurrent": workers + 1}}, **QUIET_LOGS}
        tags = {**_tags(), "dagster/partition": night.isoformat()}
        with execute_job(job, instance, run_config=run_config, tags=tags, raise_on_error=False) as result:
            report = _report(settings, "nightly", night, result)
    report.duration_s = time.perf_counter() - started
    return report


def settings_environment(settings: Settings, *, base_url: str) -> dict[str, str]:
    """``settings`` as the ``TOURNEYLAKE_*`` variables a step's process reads them from."""
    env = {}
    for name in Settings.model_fields:
        value = getattr(settings, name)
        if value is None:
            continue
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        env[ENV_PREFIX + name.upper()] = str(value)
    env[ENV_PREFIX + "BASE_URL"] = base_url
    return env


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in this process's environment for the block (the processes it starts inherit it)."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _report(settings: Settings, job_name: str, night: date | None, result: Any) -> RunReport:
    """What a run did, from its events (in-process or multiprocess alike); a night's failure is
    recorded and posted (the models' is the command's line)."""
    report = RunReport(night, result.success, None, 0.0, run_id=result.run_id)
    for event in result.all_events:
        if event.is_step_materialization:
            materialization = event.step_materialization_data.materialization
            report.assets[materialization.asset_key.to_user_string()] = {
                key: value.value for key, value in materialization.metadata.items()
            }
        elif event.event_type_value == "ASSET_CHECK_EVALUATION":
            evaluation = event.asset_check_evaluation_data
            report.checks[f"{evaluation.asset_key.to_user_string()}:{evaluation.check_name}"] = evaluation.passed
    if not result.success:
        failures = [e for e in result.all_events if e.is_step_failure]
        report.failure = failure_line(result.all_events)
        report.interrupted = any(interrupted(e.step_failure_data.error) for e in failures)
        if night is not None:
            night_failed(settings, night, job_name, result.run_id, report.failure, interrupted=report.interrupted)
    return report
