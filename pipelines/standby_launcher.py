"""Runs launched from the UI, the schedule or a backfill, forked from the standby when one waits.

Dagster's default launcher asks the code server for a fresh worker per run, which loads Dagster
and the code location again before the run's first step (about a second, as a cold
``tourneylake run`` does). :class:`StandbyRunLauncher` hands the run to the standby
(:mod:`pipelines.standby`) instead: its worker is a fork with all of that loaded, and executes
the run as Dagster's ``execute_run`` does, on the same instance, with the launcher's
environment (``dagster dev``'s, which its code servers have too). When no standby waits, or it
refuses, the launch is Dagster's own, unchanged. Terminating such a run interrupts its worker
(SIGINT, as Dagster's own code server does): the night stops as on Ctrl-C and ends canceled.

``dagster_home/dagster.yaml`` names it as the instance's ``run_launcher``.
"""

from __future__ import annotations

import os
import signal

from dagster import DagsterInstance
from dagster._core.instance.ref import InstanceRef
from dagster._core.launcher import DefaultRunLauncher, LaunchRunContext
from dagster._serdes import deserialize_value, serialize_value

from pipelines.standby import forward

__all__ = ["STANDBY_PID_TAG", "StandbyRunLauncher", "execute_launched_run"]

#: The run's tag naming its worker's pid when the standby forked it.
STANDBY_PID_TAG = "tourneylake/standby_pid"


class StandbyRunLauncher(DefaultRunLauncher):
    """Dagster's default launcher, with the run's worker forked from the standby when one waits."""

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        started: list[int] = []
        handed = forward([run.run_id, serialize_value(self._instance.get_ref())], "dagster_run", on_started=started.append)
        if handed is None:
            super().launch_run(context)
            return
        self._instance.add_run_tags(run.run_id, {STANDBY_PID_TAG: str(started[0])})
        self._run_ids.add(run.run_id)

    def terminate(self, run_id: str) -> bool:
        run = self._instance.get_run_by_id(run_id)
        if run is None or run.is_finished or STANDBY_PID_TAG not in run.tags:
            return super().terminate(run_id)
        self._instance.report_run_canceling(run)
        try:
            os.kill(int(run.tags[STANDBY_PID_TAG]), signal.SIGINT)
        except ProcessLookupError:
            return False
        return True


def execute_launched_run(run_id: str, instance_ref: str) -> int:
    """In the standby's child: run ``run_id`` as ``dagster api execute_run`` does; its status."""
    from dagster._cli.api import _execute_run_command_body
    from dagster._utils.interrupts import capture_interrupts

    with capture_interrupts(), DagsterInstance.from_ref(deserialize_value(instance_ref, InstanceRef)) as instance:
        return _execute_run_command_body(run_id, instance, lambda _event: None, set_exit_code_on_failure=False)
