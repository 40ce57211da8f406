"""The run queue skipped when it has nothing to hold back (``pipelines/run_queue.py``), on a real
instance with the shipped ``dagster.yaml``: a run waits in the queue behind a queued run, beside
runs in flight at the limit, or beside one using a pool its first steps take; otherwise it is not
queued. The launch itself (through a code server) is in ``test_webserver.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import (
    DagsterEvent,
    DagsterEventType,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    JobDefinition,
    job,
    op,
    reconstructable,
)
from dagster._core.remote_origin import InProcessCodeLocationOrigin, LoadableTargetOrigin, RemoteJobOrigin, RemoteRepositoryOrigin

from pipelines.run_queue import IdleQueueRunCoordinator
from tests.helpers import shipped_dagster_home


@op(pool="service")
def fetch() -> int:
    return 1


@op(pool="warehouse")
def load(fetched: int) -> int:
    return fetched


@op(pool="warehouse")
def build() -> None:
    return None


@op
def look() -> None:
    return None


@job
def night() -> None:
    """First steps in the service's pool, then the warehouse's (as the nightly job)."""
    load(fetch())


@job
def models() -> None:
    """The warehouse's pool only (as the models job)."""
    build()


@job
def checks() -> None:
    """No pool (as the freshness checks)."""
    look()


@pytest.fixture
def instance(tmp_path: Path, monkeypatch) -> DagsterInstance:
    shipped_dagster_home(tmp_path, monkeypatch)
    with DagsterInstance.get() as instance:
        yield instance


def test_the_shipped_instance_uses_it_and_keeps_the_queue_settings(instance: DagsterInstance) -> None:
    coordinator = instance.run_coordinator
    assert isinstance(coordinator, IdleQueueRunCoordinator)
    assert coordinator.dequeue_interval_seconds == 1
    assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 4


@pytest.mark.parametrize("ahead", [DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING])
def test_a_night_beside_another_in_flight_is_queued(instance: DagsterInstance, ahead: DagsterRunStatus) -> None:
    _run(instance, night, ahead)
    behind = _run(instance, night)
    submitted = instance.submit_run(behind.run_id, workspace=None)  # type: ignore[arg-type]  # queued: no launch, no workspace
    assert submitted.status == DagsterRunStatus.QUEUED


def test_any_run_behind_a_queued_one_is_queued(instance: DagsterInstance) -> None:
    _run(instance, night, DagsterRunStatus.QUEUED)
    assert _coordinator(instance).held_back(_run(instance, checks))


def test_runs_in_flight_at_the_limit_hold_any_run_back(instance: DagsterInstance) -> None:
    for _ in range(3):
        _run(instance, checks, DagsterRunStatus.STARTED)
    new = _run(instance, checks)
    assert not _coordinator(instance).held_back(new)
    _run(instance, checks, DagsterRunStatus.STARTED)  # four: max_concurrent_runs
    assert _coordinator(instance).held_back(new)


def test_what_does_not_hold_a_run_back(instance: DagsterInstance) -> None:
    coordinator = _coordinator(instance)
    for ended in (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED, DagsterRunStatus.NOT_STARTED):
        _run(instance, night, ended)
    assert not coordinator.held_back(_run(instance, night))  # runs that ended, or were never submitted
    _run(instance, models, DagsterRunStatus.STARTED)
    _run(instance, checks, DagsterRunStatus.STARTED)
    assert not coordinator.held_back(_run(instance, night))  # the warehouse's pool is not a night's first
    assert coordinator.held_back(_run(instance, models))  # but it is the models' own
    queued = _run(instance, night, DagsterRunStatus.QUEUED)
    assert coordinator.held_back(_run(instance, night)) and not coordinator.held_back(queued)  # itself does not count


def _coordinator(instance: DagsterInstance) -> IdleQueueRunCoordinator:
    coordinator = instance.run_coordinator
    assert isinstance(coordinator, IdleQueueRunCoordinator)
    return coordinator


# The event that puts a run in each status, as the coordinator, the launcher and the run worker report them.
_EVENT_OF = {
    DagsterRunStatus.QUEUED: DagsterEventType.RUN_ENQUEUED,
    DagsterRunStatus.STARTING: DagsterEventType.RUN_STARTING,
    DagsterRunStatus.STARTED: DagsterEventType.RUN_START,
    DagsterRunStatus.CANCELING: DagsterEventType.RUN_CANCELING,
    DagsterRunStatus.SUCCESS: DagsterEventType.RUN_SUCCESS,
    DagsterRunStatus.FAILURE: DagsterEventType.RUN_FAILURE,
    DagsterRunStatus.CANCELED: DagsterEventType.RUN_CANCELED,
}


def _run(instance: DagsterInstance, of: JobDefinition, status: DagsterRunStatus = DagsterRunStatus.NOT_STARTED) -> DagsterRun:
    """A run of ``of`` brought to ``status`` through the event that sets it (with the origins
    Dagster requires of a submitted run: this module)."""
    origin = RemoteJobOrigin(
        repository_origin=RemoteRepositoryOrigin(
            code_location_origin=InProcessCodeLocationOrigin(LoadableTargetOrigin(python_file=__file__)),
            repository_name="__repository__",
        ),
        job_name=of.name,
    )
    run = instance.create_run_for_job(of, remote_job_origin=origin, job_code_origin=reconstructable(of).get_python_origin())
    if status in _EVENT_OF:
        instance.report_dagster_event(DagsterEvent(_EVENT_OF[status].value, job_name=of.name), run_id=run.run_id)
    stored = instance.get_run_by_id(run.run_id)
    assert stored is not None and stored.status == status
    return stored
