"""Whether the nightly schedule is on, as Dagster's instance says: what ``tourneylake status``
shows (the library never imports Dagster, so the console script hands it this reader).

The instance is ``DAGSTER_HOME``'s (``dagster dev``, the daemon and ``tourneylake run`` share it);
without it there is no instance to ask. A schedule is on once started (Dagster's UI, or
``dagster schedule start``); ``nightly_schedule`` is off until then (Dagster's default), and
Dagster is imported only when there is an instance to read.
"""

from __future__ import annotations

import os
from pathlib import Path

from tourneylake.night.status import ScheduleState

__all__ = ["NIGHTLY_SCHEDULE", "nightly_schedule_state"]

#: The nightly schedule's name (``tourneylake.pipelines.definitions.nightly_schedule``).
NIGHTLY_SCHEDULE = "nightly_schedule"


def nightly_schedule_state() -> ScheduleState:
    """Whether ``nightly_schedule`` is on in the instance of ``DAGSTER_HOME`` (``on=None``: no
    instance to read, or it could not be read, with why)."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        return ScheduleState(None, "DAGSTER_HOME is not set: no Dagster instance to ask")
    if not Path(home).is_dir():
        return ScheduleState(None, f"DAGSTER_HOME {home} is not a folder: no Dagster instance to ask")
    from dagster import DagsterInstance

    try:
        with DagsterInstance.get() as instance:
            states = [state for state in instance.all_instigator_state() if state.instigator_name == NIGHTLY_SCHEDULE]
    except Exception as exc:  # noqa: BLE001 - a status never fails for want of the instance
        return ScheduleState(None, f"Dagster's instance in {home} could not be read: {' '.join(str(exc).split())}")
    on = any(state.status.value == "RUNNING" for state in states)
    return ScheduleState(on, f"Dagster's instance in {home}")
