"""The service's clock, as its answers in this process told it: each answer's
``Response/@timestamp`` by service root, and when it was read. The quota day is counted on the
service's clock (:mod:`tourneylake.night.quota_day`); reading it needs no HTTP client, so
``tourneylake status`` and the other readers never import one."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

_LOCK = threading.Lock()
# By service root: the latest answer's timestamp and when it was read (monotonic seconds).
_SERVER_TIMES: dict[str, tuple[datetime, float]] = {}


def note_server_time(base_url: str, timestamp: datetime) -> None:
    """Keep an answer's timestamp as the service at ``base_url`` said it, read now."""
    with _LOCK:
        _SERVER_TIMES[base_url.rstrip("/")] = (timestamp, time.monotonic())


def server_now(base_url: str) -> datetime | None:
    """The service's clock now, as its latest answer in this process told it (its timestamp plus
    the time since); ``None`` before any answer. Its quota day is counted on its clock, not ours."""
    with _LOCK:
        found = _SERVER_TIMES.get(base_url.rstrip("/"))
    if found is None:
        return None
    stamp, read_at = found
    return stamp + timedelta(seconds=time.monotonic() - read_at)
