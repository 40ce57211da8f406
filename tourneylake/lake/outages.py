"""How the lake rides out an outage of its store: a request that fails for a reason the store may
get over (a 5xx, throttling, a dropped or refused connection, a body cut short) is asked again
with backoff until the store has been out for :data:`PATIENCE_S` seconds, so a restart of an
object store or a throttling burst costs a night a pause, not the night. The minute counts from
the outage's first failure in this process, not each operation's: an operation that begins (or is
tried again by its caller) once the store has been out for a minute gives up at its first failure,
so no layer of tries stretches the outage a night waits for.

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

__all__ = [
    "KEEP_PAID_S", "PATIENCE_S", "out_elsewhere", "out_too_long", "retrying_for", "ride_out", "store_answered", "store_failed", "transient_text",
    "wait_before",
]  # fmt: skip

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds a store operation is tried again (with backoff) before it gives up.
PATIENCE_S = 60.0
#: Seconds what was paid for (a body, a ledger row) is tried again, from its first failure, before
#: it is given up: the night stops paying after :data:`PATIENCE_S`, but keeps what it paid for.
KEEP_PAID_S = 300.0
#: The first pause between two tries, and the longest (doubling in between, with jitter).
FIRST_WAIT_S = 0.1
LONGEST_WAIT_S = 5.0
#: How often, at most, the process repeats that its store is not answering.
SAY_EVERY_S = 10.0
#: A failure this long after the last one (nobody was retrying meanwhile) begins a new outage.
QUIET_S = 15.0

_lock = threading.Lock()
_tokens = itertools.count()
_retrying: dict[int, float] = {}  # each operation retrying now → when it began (time.monotonic())
_said_at = 0.0
_outage_began: float | None = None  # the store's first failure with no answer since (time.monotonic())
_last_failure = 0.0


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
    global _said_at, _outage_began, _last_failure
    now = time.monotonic()
    with _lock:
        news = not _retrying
        if token is None:
            token = next(_tokens)
            _retrying[token] = now
        if _outage_began is None or now - _last_failure > QUIET_S:
            _outage_began = now
        _last_failure = now
        since = _outage_began
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


def out_too_long(first_failure: float, patience_s: float = PATIENCE_S) -> bool:
    """Whether an operation failing since ``first_failure`` gives up: the store has been out for
    ``patience_s`` seconds, counted from this process's first failure of the outage."""
    with _lock:
        began = first_failure if _outage_began is None else min(first_failure, _outage_began)
    return time.monotonic() - began >= patience_s


def out_elsewhere(lasted_s: float | None = None) -> None:
    """Another process doing this one's work (the raw saver) gave up on the store once it had been
    out for ``lasted_s`` (default :data:`PATIENCE_S`): the outage began that long ago here too, so
    the work done again in this process does not wait out another minute."""
    global _outage_began, _last_failure
    now = time.monotonic()
    began = now - (PATIENCE_S if lasted_s is None else lasted_s)
    with _lock:
        _outage_began = began if _outage_began is None else min(_outage_began, began)
        _last_failure = now


def store_answered(token: int | None, *, answered: bool = True) -> None:
    """An operation got its answer (``answered``: the outage is over) or gave up; an operation
    that was retrying (``token``) is no longer counted."""
    global _outage_began
    if answered and _outage_began is not None:
        with _lock:
            _outage_began = None
    if token is None:
        return
    with _lock:
        began = _retrying.pop(token, None)
        over = not _retrying
    if began is not None and over and answered:
        log.warning("the lake's store answers again (after %.0f s)", time.monotonic() - began)


def ride_out(call: Callable[[], T], transient: Callable[[BaseException], bool], *, patience_s: float | None = None) -> T:
    """``call``, tried again with backoff while it fails for a ``transient`` reason, until the
    store has been out for ``patience_s`` (default :data:`PATIENCE_S`) seconds (:func:`out_too_long`);
    then its last failure is raised."""
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
                if out_too_long(first_failure, patience):
                    raise
                time.sleep(wait_before(attempt))
            else:
                answered = True
                return result
        raise AssertionError("unreachable")
    finally:
        store_answered(token, answered=answered)
