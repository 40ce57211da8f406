"""How the lake rides out an outage of its store: a request that fails for a reason the store may
get over (a 5xx, throttling, a dropped or refused connection, a body cut short) is asked again
with backoff for up to :data:`PATIENCE_S` seconds before the operation gives up, so a restart of
an object store or a throttling burst costs a night a pause, not the night.

The process says when its store stops answering and when it answers again (warnings on this
module's logger, repeated while it lasts), and :func:`retrying_for` tells the progress line how
long it has been retrying. delta-rs retries its own requests (its client options, set by
:meth:`~tourneylake.lake.delta_tables.DeltaTables.storage_options` with the same patience).
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from tourneylake.errors import one_line

__all__ = ["PATIENCE_S", "retrying_for", "ride_out", "store_answered", "store_failed", "transient_text", "wait_before"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds a store operation is tried again (with backoff) before it gives up.
PATIENCE_S = 60.0
#: The first pause between two tries, and the longest (doubling in between, with jitter).
FIRST_WAIT_S = 0.1
LONGEST_WAIT_S = 5.0
#: How often, at most, the process repeats that its store is not answering.
SAY_EVERY_S = 10.0

_lock = threading.Lock()
_tokens = itertools.count()
_retrying: dict[int, float] = {}  # each operation retrying now → when it began (time.monotonic())
_said_at = 0.0


#: What a failure the store may get over says (a client's message, lowercased): a 5xx or
#: throttling, a connection refused, lost or timed out, a body cut short, tries spent.
_TRANSIENT = (
    "body error", "connection", "closed", "reset", "timed out", "timeout", "incomplete", "error sending request",
    "server error", "service unavailable", "slowdown", "slow down", "internal error", " retries",
)  # fmt: skip


def transient_text(text: str) -> bool:
    """Whether a store client's error message tells of a failure the store may get over (never a
    credential's refusal or a request the store rejects: a 4xx)."""
    head = text.split("\n\n", 1)[0].lower()
    if "credential" in head or "client error" in head or "forbidden" in head or "access denied" in head:
        return False
    return any(needle in head for needle in _TRANSIENT)


def wait_before(attempt: int) -> float:
    """Seconds to wait before try ``attempt + 1`` (exponential, with jitter, capped)."""
    return min(LONGEST_WAIT_S, FIRST_WAIT_S * 2**attempt) * (0.5 + random.random() / 2)


def retrying_for() -> float | None:
    """How long this process has been retrying its store without an answer (``None``: it answers)."""
    with _lock:
        return time.monotonic() - min(_retrying.values()) if _retrying else None


def store_failed(token: int | None, exc: BaseException) -> int:
    """An operation's try failed for a reason the store may get over: the operation is counted as
    retrying (``token``: already counted) and the process says so when it is news. Returns the token."""
    global _said_at
    now = time.monotonic()
    with _lock:
        news = not _retrying
        if token is None:
            token = next(_tokens)
            _retrying[token] = now
        since = min(_retrying.values())
        say = news or now - _said_at >= SAY_EVERY_S
        if say:
            _said_at = now
    if say:
        waited = now - since
        log.warning(
            "the lake's store is not answering (%s): retrying for up to %.0f s more",
            one_line(exc).split(" Debug source:", 1)[0][:240],  # obstore's debug dump left out
            max(0.0, PATIENCE_S - waited),
        )
    return token


def store_answered(token: int | None, *, answered: bool = True) -> None:
    """An operation that was retrying got its answer (``answered``) or gave up: no longer counted."""
    if token is None:
        return
    with _lock:
        began = _retrying.pop(token, None)
        over = not _retrying
    if began is not None and over and answered:
        log.warning("the lake's store answers again (after %.0f s)", time.monotonic() - began)


def ride_out(call: Callable[[], T], transient: Callable[[BaseException], bool], *, patience_s: float | None = None) -> T:
    """``call``, tried again with backoff while it fails for a ``transient`` reason, until it has
    failed for ``patience_s`` (default :data:`PATIENCE_S`) seconds; then its last failure is raised."""
    patience = PATIENCE_S if patience_s is None else patience_s
    token: int | None = None
    first_failure = 0.0
    answered = False
    try:
        for attempt in itertools.count():
            try:
                result = call()
            except Exception as exc:
                if not transient(exc):
                    raise
                if token is None:
                    first_failure = time.monotonic()
                token = store_failed(token, exc)
                if time.monotonic() - first_failure >= patience:
                    raise
                time.sleep(wait_before(attempt))
            else:
                answered = True
                return result
        raise AssertionError("unreachable")
    finally:
        store_answered(token, answered=answered)
