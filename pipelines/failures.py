"""A failed run, told once: its reason in one line, whether Ctrl-C ended it, and the sensor
that records a failed night in the lake and posts the alert (``tourneylake.night.alerts``).

``tourneylake run`` records and announces its own failures (it knows them first, and runs
without the daemon), so the sensor leaves its runs alone (they carry :data:`PID_TAG`).
"""

from __future__ import annotations

from datetime import date
from typing import Any

from dagster import DefaultSensorStatus, RunFailureSensorContext, run_failure_sensor

from tourneylake.assets.resource import TourneylakeResource
from tourneylake.night.alerts import night_failed

# Which process runs a night in-process (`tourneylake run`), so that a later run can tell a dead
# one from a live one, and the sensor knows the command line has told the user itself.
HOST_TAG, PID_TAG = "tourneylake/host", "tourneylake/pid"
PARTITION_TAG = "dagster/partition"
#: The jobs whose runs harvest a night: a failure is the night's last outcome.
HARVESTING_JOBS = ("nightly", "__ASSET_JOB")


def root_message(error: Any) -> str:
    """The innermost error's message, on one line (Dagster wraps user errors)."""
    while getattr(error, "cause", None) is not None:
        error = error.cause
    message = getattr(error, "message", str(error)).strip()
    # Dagster prefixes the exception's class path: keep what the user needs.
    first = message.splitlines()[0] if message else "unknown error"
    return first.split(": ", 1)[1] if first.startswith(("tourneylake.", "dagster.")) and ": " in first else first


def interrupted(error: Any) -> bool:
    """Whether a step's error is an interruption (Dagster turns Ctrl-C into its own error)."""
    while error is not None:
        if getattr(error, "cls_name", None) in ("DagsterExecutionInterruptedError", "KeyboardInterrupt"):
            return True
        error = getattr(error, "cause", None)
    return False


@run_failure_sensor(
    name="night_failed",
    default_status=DefaultSensorStatus.RUNNING,
    description="A failed run: its night's record in the lake says why (`tourneylake status`), and "
    "TOURNEYLAKE_ALERT_WEBHOOK_URL, when set, receives a JSON post (night, job, reason, searches spent).",
)
def night_failed_sensor(context: RunFailureSensorContext, tourneylake: TourneylakeResource) -> None:
    run = context.dagster_run
    if run.tags.get(PID_TAG) or PARTITION_TAG not in run.tags:  # `tourneylake run` said it itself
        return
    errors = [event.step_failure_data.error for event in context.get_step_failure_events()]
    reason = root_message(errors[0]) if errors else " ".join((context.failure_event.message or "the run failed").split())
    night_failed(
        tourneylake.settings(),
        date.fromisoformat(run.tags[PARTITION_TAG]),
        run.job_name,
        run.run_id,
        reason,
        interrupted=any(interrupted(error) for error in errors),
        record=run.job_name in HARVESTING_JOBS,
    )
