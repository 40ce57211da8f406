"""The run queue skipped when idle (``pipelines/run_queue.py``), on a real instance with the
shipped ``dagster.yaml``: a run submitted behind another one in flight waits in the queue; with
none, it is not queued. The launch itself (through a code server) is in ``test_webserver.py``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dagster import DagsterEvent, DagsterEventType, DagsterInstance, DagsterRun, DagsterRunStatus, job, op, reconstructable
from dagster._core.remote_origin import InProcessCodeLocationOrigin, LoadableTargetOrigin, RemoteJobOrigin, RemoteRepositoryOrigin

from pipelines.run_queue import IdleQueueRunCoordinator
from tests.helpers import REPO


@op
def nothing() -> None:
    return None


@job
def tiny() -> None:
    nothing()


# Where a submitted run's job comes from (Dagster requires it of a queued run): this module.
_ORIGIN = RemoteJobOrigin(
    repository_origin=RemoteRepositoryOrigin(
        code_location_origin=InProcessCodeLocationOrigin(LoadableTargetOrigin(python_file=__file__)),
        repository_name="__repository__",
    ),
    job_name=tiny.name,
)


@pytest.fixture
def instance(tmp_path: Path, monkeypatch) -> DagsterInstance:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with DagsterInstance.get() as instance:
        yield instance


def test_the_shipped_instance_uses_it_and_keeps_the_queue_settings(instance: DagsterInstance) -> None:
    coordinator = instance.run_coordinator
    assert isinstance(coordinator, IdleQueueRunCoordinator)
    assert coordinator.dequeue_interval_seconds == 1
    assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 4


@pytest.mark.parametrize("other", [DagsterRunStatus.QUEUED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED])
def test_a_run_behind_another_in_flight_is_queued(instance: DagsterInstance, other: DagsterRunStatus) -> None:
    _in_status(instance, other)
    behind = _in_status(instance, DagsterRunStatus.NOT_STARTED)
    coordinator = instance.run_coordinator
    assert isinstance(coordinator, IdleQueueRunCoordinator)
    assert coordinator.busy(behind.run_id)
    submitted = instance.submit_run(behind.run_id, workspace=None)  # type: ignore[arg-type]  # queued: no launch, no workspace
    assert submitted.status == DagsterRunStatus.QUEUED


def test_finished_runs_and_the_run_itself_leave_the_queue_idle(instance: DagsterInstance) -> None:
    coordinator = instance.run_coordinator
    assert isinstance(coordinator, IdleQueueRunCoordinator)
    assert not coordinator.busy("no-such-run")
    for ended in (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED, DagsterRunStatus.NOT_STARTED):
        _in_status(instance, ended)
    alone = _in_status(instance, DagsterRunStatus.QUEUED)
    assert not coordinator.busy(alone.run_id)
    assert coordinator.busy("another-run")


# The event that puts a run in each status, as the coordinator, the launcher and the run worker report them.
_EVENT_OF = {
    DagsterRunStatus.QUEUED: DagsterEventType.RUN_ENQUEUED,
    DagsterRunStatus.STARTING: DagsterEventType.RUN_STARTING,
    DagsterRunStatus.STARTED: DagsterEventType.RUN_START,
    DagsterRunStatus.SUCCESS: DagsterEventType.RUN_SUCCESS,
    DagsterRunStatus.FAILURE: DagsterEventType.RUN_FAILURE,
    DagsterRunStatus.CANCELED: DagsterEventType.RUN_CANCELED,
}


def _in_status(instance: DagsterInstance, status: DagsterRunStatus) -> DagsterRun:
    """A run of ``tiny`` brought to ``status`` through the event that sets it."""
    run = instance.create_run_for_job(tiny, remote_job_origin=_ORIGIN, job_code_origin=reconstructable(tiny).get_python_origin())
    if status in _EVENT_OF:
        instance.report_dagster_event(DagsterEvent(_EVENT_OF[status].value, job_name=tiny.name), run_id=run.run_id)
    stored = instance.get_run_by_id(run.run_id)
    assert stored is not None and stored.status == status
    return stored
