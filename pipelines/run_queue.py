"""Dagster's run queue, skipped when it has nothing to order or hold back.

A run launched from the UI or the schedule waits in Dagster's queue until the daemon's next look
(every second here), a good share of a small night. :class:`IdleQueueRunCoordinator` launches a
run at once, as Dagster's default coordinator does, when the queue would let it go at its next
look anyway: no run is queued ahead of it, the runs in flight are fewer than the limit, and
none of them uses a pool its first steps need (a night is not launched beside another night or a backfill's, so those
take turns in the queue, not as processes waiting for slots). Otherwise it queues, as before.
The pools still serialise the steps either way: they are claimed by the steps, not by the queue
(two runs submitted at the same instant may both start at once, and take turns in the pools).

``dagster_home/dagster.yaml`` and ``deploy/dagster.yaml`` name it as the instance's
``run_coordinator``; its settings are the ``QueuedRunCoordinator``'s.
"""

from __future__ import annotations

from dagster import DagsterRunStatus, RunsFilter
from dagster._core.run_coordinator import QueuedRunCoordinator, SubmitRunContext
from dagster._core.storage.dagster_run import DagsterRun

__all__ = ["IdleQueueRunCoordinator"]

# Runs in flight: launched and not yet ended.
_IN_FLIGHT = [DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]
# More runs in flight than this are not looked at one by one: the run queues.
_LOOKED_AT = 64


class IdleQueueRunCoordinator(QueuedRunCoordinator):
    """The queued run coordinator, launching a run at once when the queue would not hold it
    (see the module's docstring)."""

    def submit_run(self, context: SubmitRunContext) -> DagsterRun:
        run = context.dagster_run
        if run.status != DagsterRunStatus.NOT_STARTED or self.held_back(run):
            return super().submit_run(context)
        self._instance.launch_run(run.run_id, context.workspace)
        launched = self._instance.get_run_by_id(run.run_id)
        assert launched is not None, f"run {run.run_id} vanished while it was launched"
        return launched

    def held_back(self, run: DagsterRun) -> bool:
        """Whether ``run`` should wait in the queue: another run is queued, the runs in flight
        are at the limit, or one of them uses a pool ``run``'s first steps take."""
        instance = self._instance
        if any(other != run.run_id for other in instance.get_run_ids(RunsFilter(statuses=[DagsterRunStatus.QUEUED]), limit=2)):
            return True
        flying = instance.get_runs(RunsFilter(statuses=_IN_FLIGHT), limit=_LOOKED_AT)
        in_flight = [other for other in flying if other.run_id != run.run_id]
        queue = instance.get_concurrency_config().run_queue_config
        at_limit = queue is not None and 0 <= queue.max_concurrent_runs <= len(in_flight)
        if at_limit or len(flying) == _LOOKED_AT:
            return True
        first_pools = set(run.run_op_concurrency.root_key_counts) if run.run_op_concurrency else set()
        return any(first_pools & _pools_of(other) for other in in_flight)


def _pools_of(run: DagsterRun) -> set[str]:
    """Every pool a step of ``run`` takes."""
    return set(run.run_op_concurrency.all_pools or ()) if run.run_op_concurrency else set()
