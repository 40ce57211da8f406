"""A night that failed is recorded in the lake and announced: a JSON post to the webhook of
``TOURNEYLAKE_ALERT_WEBHOOK_URL`` (a chat's incoming webhook, a pager, any HTTP receiver).

Both Dagster's run-failure sensor and ``tourneylake run`` call :func:`night_failed`, so a
failed night reads the same wherever it ran. The payload holds no secret: the night, the job,
the run, the reason in one line (tourneylake's errors never hold credentials), the searches the
night has cost so far (its ledger, every run), and a ``text`` line for chat services. The URL
itself is a secret (chat webhooks hold a token): it is never logged, and a post that fails is
one warning that does not name it.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from datetime import date
from typing import Any

import orjson

from tourneylake.config import Settings
from tourneylake.errors import TourneylakeError, one_line
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import Ledger
from tourneylake.night.status import record_end

__all__ = ["alert_payload", "night_failed", "post_alert"]

log = logging.getLogger(__name__)

POST_TIMEOUT_S = 10.0


def night_failed(
    settings: Settings, night: date, job: str, run_id: str, reason: str, *, interrupted: bool = False, record: bool = True
) -> None:
    """Record in the night's record that run ``run_id`` of ``job`` failed (or was interrupted,
    which is the user's doing and posts nothing), then post the alert. ``record=False``: a run
    that does not harvest the night (a rebuild) leaves the record of its last harvest as it is.
    A failure to record it (a data directory that cannot be written, say) is one warning: the
    failure being reported is the one that counts, and is never hidden by this one."""
    lake = Lake.of(settings)
    if record:
        try:
            record_end(lake, night, run_id, "interrupted" if interrupted else "failed", reason)
        except (OSError, TourneylakeError) as exc:
            log.warning("the failure could not be recorded in the lake: %s", one_line(exc))
    if not interrupted:
        post_alert(settings, alert_payload(lake, night, job, run_id, reason))


def alert_payload(lake: Lake, night: date, job: str, run_id: str, reason: str) -> dict[str, Any]:
    try:
        spent: int | None = Ledger(lake).spent(night)
    except (OSError, TourneylakeError):  # a lake that cannot be read: the alert goes out all the same
        spent = None
    return {
        "event": "run_failed",
        "night": night.isoformat(),
        "job": job,
        "run_id": run_id,
        "reason": reason,
        "searches_spent": spent,
        "text": f"tourneylake: the {job} run of the night of {night} failed: {reason} ({spent if spent is not None else 'unknown'} searches spent that night)",
    }


def post_alert(settings: Settings, payload: dict[str, Any]) -> bool:
    """Post ``payload`` to the alert webhook, when one is set; whether it was accepted (2xx).
    Through urllib, which logs nothing (httpx logs every request's URL, and this one is a secret)."""
    if settings.alert_webhook_url is None:
        return False
    request = urllib.request.Request(
        settings.alert_webhook_url.get_secret_value(),
        data=orjson.dumps(payload),
        headers={"Content-Type": "application/json", "User-Agent": "tourneylake"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=POST_TIMEOUT_S) as response:
            return 200 <= response.status < 300
    except urllib.error.HTTPError as exc:
        log.warning("the alert webhook answered HTTP %d: the failure is recorded in the lake", exc.code)
    except (OSError, ValueError) as exc:
        log.warning("the alert webhook could not be reached (%s): the failure is recorded in the lake", type(exc).__name__)
    return False
