"""The free calls' steps (metadata, countries, news): a transient failure of the service is tried
again by the step itself; an interruption is not (Dagster retries an interrupted step that has a
retry policy, so a Ctrl-C or a terminate during the night's first calls used to be tried again)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from dagster import materialize

from tests.helpers import DEMO_ACCOUNT
from tests.scripted_server import Reply, ScriptedServer
from tourneylake.assets.reference import FREE_CALL_RETRIES, countries
from tourneylake.assets.resource import TourneylakeResource
from tourneylake.pipelines.failures import root_message

NIGHT = date(2026, 11, 20)


def test_a_transient_failure_of_a_free_call_is_tried_again(tmp_path: Path) -> None:
    # The service answers, but every time with HTTP 503: transient. (One that takes no connection
    # at all is not tried again: a wrong URL, said at once — tests/end_to_end/test_first_hour.py.)
    with ScriptedServer(default=Reply(status=503)) as service:
        resource = TourneylakeResource(
            base_url=service.base_url, **DEMO_ACCOUNT, data_dir=str(tmp_path), max_attempts=1, retry_initial_wait_s=0.01
        )
        result = materialize(
            [countries], partition_key=NIGHT.isoformat(), resources={"tourneylake": resource}, raise_on_error=False
        )
    assert not result.success
    retries = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    assert len(retries) == FREE_CALL_RETRIES  # then it fails, with the service's error
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    reason = root_message(failure.step_failure_data.error)  # what `tourneylake run` and the alert say
    assert "Retry" not in reason and "countries" in reason, reason
