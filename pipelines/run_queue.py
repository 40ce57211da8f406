"""Dagster's run queue, skipped when it is idle.

A run launched from the UI or the schedule waits in Dagster's queue until the daemon's next look
(every second here): 0.5 s on average, and the daemon's own iteration on top, for a night of
two or three seconds. When nothing else is queued or running, the queue has nothing to order
and no limit to keep, so :class:`IdleQueueRunCoordinator` launches such a run at once, as
Dagster's default coordinator does; behind any other run (a backfill's nights, the schedule
beside a manual run) it queues, as before. The pools still serialise the steps either way:
they are claimed by the steps, not by the queue (two runs submitted at the same instant may both
start at once, and take turns in the pools).

``dagster_home/dagster.yaml`` and ``deploy/dagster.yaml`` name it as the instance's
``run_coordinator``; its settings are the ``QueuedRunCoordinator``'s.
"""

from __future__ import annotations

from dagster import DagsterRunStatus, RunsFilter
from dagster._core.run_coordinator import QueuedRunCoordinator, SubmitRunContext
from dagster._core.storage.dagster_run import DagsterRun

__all__ = ["IdleQueueRunCoordinator"]

# Runs the queue orders or waits on: another one in any of these states, and a new run queues.
_IN_FLIGHT = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]


class IdleQueueRunCoordinator(QueuedRunCoordinator):
    """The queued run coordinator, launching a run at once when no other run is queued or in
    flight (see the module's docstring)."""

    def submit_run(self, context: SubmitRunContext) -> DagsterRun:
        run = context.dagster_run
        if run.status != DagsterRunStatus.NOT_STARTED or self.busy(run.run_id):
            return super().submit_run(context)
        self._instance.launch_run(run.run_id, context.workspace)
        launched = self._instance.get_run_by_id(run.run_id)
        assert launched is not None, f"run {run.run_id} vanished while it was launched"
        return launched

    def busy(self, run_id: str) -> bool:
        """Whether a run other than ``run_id`` is queued or in flight."""
        others = self._instance.get_run_ids(RunsFilter(statuses=_IN_FLIGHT), limit=2)
        return any(other != run_id for other in others)
