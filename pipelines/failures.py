"""A failed run, told once: its reason in one line (a step whose process died is named by what
it ran and how it died), whether Ctrl-C ended it, and the sensor that records a failed night in
the lake and posts the alert (``tourneylake.night.alerts``).

``tourneylake run`` records and announces its own failures (it knows them first, and runs
without the daemon), so the sensor leaves its runs alone (they carry :data:`PID_TAG`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date
from typing import Any

from dagster import DagsterEvent, DefaultSensorStatus, RunFailureSensorContext, run_failure_sensor

from tourneylake.assets.resource import TourneylakeResource
from tourneylake.assets.steps import PID_TAG
from tourneylake.night.alerts import night_failed

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


#: How an executor says a step's process died: Dagster's multiprocess executor ("was terminated
#: by signal 9 (SIGKILL)", "unexpectedly exited with code 3"), Celery's ("Worker exited
#: prematurely: signal 9 (SIGKILL)", "exitcode 3").
_SIGNAL = re.compile(r"signal (\d+) \((SIG[A-Z0-9]+)\)")
_EXIT = re.compile(r"(?:exited with code|exitcode) (-?\d+)")
#: A step's error as the Celery executor lists them: ``[step_key]: Class: message``.
_WORKER_ERROR = re.compile(r"^\[(?P<step>[^\]]+)\]: (?P<error>.+)$", re.MULTILINE)
#: The step of an account's harvest (``player_summaries/<account>``) and its key's prefix.
_HARVEST_STEP = "player_summaries__"


def step_named(step_key: str) -> str:
    """What a step does, for a person: an account's harvest by the account's name."""
    if step_key.startswith(_HARVEST_STEP):
        return f"account {step_key.removeprefix(_HARVEST_STEP)}'s harvest"
    return f"step {step_key}"


def how_it_died(text: str) -> str | None:
    """How a step's process died, from its executor's words (``None``: they do not say it died)."""
    if found := _SIGNAL.search(text):
        return f"killed by signal {found[1]}, {found[2]}"
    if found := _EXIT.search(text):
        return f"its process exited with code {found[1]}"
    return None


def failure_line(events: Iterable[DagsterEvent]) -> str:
    """Why a run failed, in one line: the first failed step's innermost error; a step whose
    process died (killed, out of memory, its Celery worker lost) named by what it ran and how it
    died, never an executor's class name; else the run's own failure."""
    events = list(events)
    for event in events:
        if not event.is_step_failure:
            continue
        error = event.step_failure_data.error
        if error is not None and error.cls_name == "ChildProcessCrashException":
            said = " ".join(e.message or "" for e in events if e.step_key == event.step_key and e.is_engine_event)
            return f"{step_named(str(event.step_key))} died ({how_it_died(said) or 'its process ended without a word'})"
        return root_message(error) if error is not None else f"{step_named(str(event.step_key))} failed"
    for event in events:
        if not event.is_run_failure:
            continue
        error = getattr(event.event_specific_data, "error", None)
        text = "" if error is None else str(getattr(error, "message", ""))
        for found in _WORKER_ERROR.finditer(text):
            how = how_it_died(found["error"])
            if how is not None:
                return f"{step_named(found['step'])} died ({how})"
        return root_message(error) if error is not None else " ".join((event.message or "the run failed").split())
    return "the run did not complete"


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
    reason = failure_line(entry.dagster_event for entry in context.instance.all_logs(run.run_id) if entry.dagster_event)
    night_failed(
        tourneylake.settings(),
        date.fromisoformat(run.tags[PARTITION_TAG]),
        run.job_name,
        run.run_id,
        reason,
        interrupted=any(interrupted(error) for error in errors),
        record=run.job_name in HARVESTING_JOBS,
    )
