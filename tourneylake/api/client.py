"""Sync and async clients for the service: one request builder and response reader shared by both
(:class:`_Protocol`), each client with one connection pool and explicit timeouts.

Retries (tenacity: exponential backoff with jitter, bounded in attempts and in total time) are
for ``retryable`` errors only: transport failures, 5xx and 429 (waiting at least what
``Retry-After`` asks), bodies cut short, error 0 and 101024 (which also lowers the async
client's concurrency, :class:`AdaptiveLimit`); a complete answer that cannot be read is never
retried. Hooks let a caller keep its promises: ``on_body`` gets every HTTP 200 body before it is
parsed (and may return a callable told the body's status once its envelope is read);
``before_attempt`` may refuse a try (the budget), and ``confirm_attempt`` withdraw one whose
write-ahead line took a while (the budget stopped meanwhile); ``on_answer`` hears an answer arrive;
``on_attempt`` gets an :class:`Attempt` for the search ledger. The async client sends with
aiohttp (:class:`_AiohttpLane`) behind httpx's responses and exceptions; httpx's own transport
serves tests, proxies and ``TOURNEYLAKE_HTTP_BACKEND``.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import hashlib
import importlib.util
import logging
import os
import re
import ssl
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import httpx
import tenacity

from tourneylake import __version__
from tourneylake.api import calls
from tourneylake.api.answers import call_payload, read_accepted_envelope, read_answer
from tourneylake.api.calls import Call
from tourneylake.api.envelope import Envelope, service_error
from tourneylake.api.errors import (
    ApiError,
    LoggedInElsewhere,
    MalformedCallError,
    MalformedResponse,
    ServiceError,
    ServiceUnreachable,
    TransportError,
    UnusableResponse,
)
from tourneylake.api.server_clock import note_server_time
from tourneylake.api.tree import Node, parse
from tourneylake.config import Settings
from tourneylake.errors import ConfigError
from tourneylake.runtime.threads import submit_to_finish

log = logging.getLogger(__name__)
T = TypeVar("T")

USER_AGENT = f"tourneylake/{__version__} (+httpx/{httpx.__version__})"
ACCEPT = {"json": "application/json", "xml": "application/xml"}

_SECRET_QUERY = re.compile(r"(?i)((?:Password|Username)=)[^&\s\"']*")


def redact(text: str) -> str:
    """Remove credentials from a URL or message (query-parameter authentication puts them there)."""
    return _SECRET_QUERY.sub(r"\1***", text)


class _RedactCredentials(logging.Filter):
    """httpx logs request URLs at INFO; with query-parameter credentials they would leak."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.args = tuple(redact(a) if isinstance(a, str) else _redact_obj(a) for a in record.args)
        record.msg = redact(str(record.msg))
        return True


def _redact_obj(value: Any) -> Any:
    return redact(str(value)) if isinstance(value, httpx.URL) else value


_redactor = _RedactCredentials()
for _name in ("httpx", "httpcore"):
    if _redactor not in logging.getLogger(_name).filters:
        logging.getLogger(_name).addFilter(_redactor)


def encode_password(password: str, appkey: str) -> str:
    """The service's password rule: ``MD5hex(lowercase(MD5hex(password)) + application_key)``."""
    # MD5 is the service's rule, not a choice of ours; it protects nothing locally.
    inner = hashlib.md5(password.encode("utf-8"), usedforsecurity=False).hexdigest().lower()
    return hashlib.md5((inner + appkey.lower()).encode("utf-8"), usedforsecurity=False).hexdigest()


@dataclass(frozen=True, slots=True)
class ApiResponse:
    """A successful response: its envelope, its tree and the body exactly as received."""

    call: Call
    envelope: Envelope
    tree: Node | None  # None when the call was read for its envelope only (``send(..., tree=False)``)
    body: bytes
    format: str
    fetched_at: datetime
    attempts: int

    @property
    def root(self) -> Node:
        """The body's tree (parsed on each use when the call was read for its envelope only;
        raises :class:`~tourneylake.api.tree.MalformedPayload` if it cannot be read)."""
        return self.tree if self.tree is not None else parse(self.body, self.format)

    @property
    def payload(self) -> Node | None:
        """The resource's data element (``PlayerResponse``, ``MetadataResponse``, ...)."""
        return call_payload(self.root, self.call)

    @property
    def remaining_searches(self) -> int | None:
        return self.envelope.remaining_searches


@dataclass(frozen=True, slots=True)
class ReceivedBody:
    """An HTTP 200 body as it arrived, before anything parsed it."""

    call: Call
    body: bytes
    format: str
    fetched_at: datetime


@dataclass(frozen=True, slots=True)
class Attempt:
    """One try of one call, for the search ledger."""

    call: Call
    number: int
    started_at: datetime
    duration_s: float
    outcome: str  # "ok", "service_error", "transport_error", "malformed_response", "unusable_response", "malformed_call"
    error_code: int | None
    remaining_after: int | None
    error: str | None


BodyStatus = Callable[[str], None]
BodyHook = Callable[[ReceivedBody], BodyStatus | None]


class BodySaver(Protocol):
    """How an :class:`AsyncClient` saves each 200 body before it is parsed: :meth:`save` returns
    once the body is kept, with a function that names it by its status and returns what to await
    before the call's caller hears of it (or ``None``: nothing to name)."""

    async def save(self, received: ReceivedBody) -> Callable[[str], asyncio.Future[None]] | None: ...

    async def aclose(self) -> None: ...


class _PoolSaver:
    """``on_body`` run on a small pool of threads, not on the event loop: saving a body (file
    writes, fsync) would otherwise stall every other request in flight. Naming a body by its
    status is a rename, which waits for the file system's journal while the pool's fsyncs commit,
    so it runs on the pool too."""

    def __init__(self, on_body: BodyHook, threads: int) -> None:
        self.on_body = on_body
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tourneylake-body")

    async def save(self, received: ReceivedBody) -> Callable[[str], asyncio.Future[None]] | None:
        # Saved (and named) even if the call's task is cancelled while it waits for a thread.
        hook = await asyncio.wrap_future(submit_to_finish(self.pool, self.on_body, received))
        if hook is None:
            return None
        return lambda status: asyncio.wrap_future(submit_to_finish(self.pool, hook, status))

    async def aclose(self) -> None:
        self.pool.shutdown(wait=True)


#: Both may return the future of a write the call must wait for (the search ledger's line;
#: done already when written by its caller, see `LedgerWriter`): before it goes out, before
#: its caller hears of it.
AttemptHook = Callable[[Attempt], Future[None] | None]
GateHook = Callable[[Call, int], Future[None] | None]
AnswerHook = Callable[[Call, int], None]


class _Protocol:
    """Request building and response reading shared by both clients."""

    def __init__(
        self,
        settings: Settings,
        base_url: str | None,
        on_body: BodyHook | None,
        on_attempt: AttemptHook | None,
        before_attempt: GateHook | None,
        retry_until: float | None = None,
        on_answer: AnswerHook | None = None,
        confirm_attempt: AnswerHook | None = None,
    ) -> None:
        url = base_url or settings.base_url
        if url == "sandbox" or not url.startswith(("http://", "https://")):
            raise ConfigError(
                f"base URL {url!r} is not an http(s) URL; for the built-in sandbox use "
                "tourneylake.night.endpoint.connect(), which starts it"
            )
        self.settings = settings
        self.base_url = url.rstrip("/")
        self.on_body = on_body
        self.on_attempt = on_attempt
        self.before_attempt = before_attempt
        self.confirm_attempt = confirm_attempt
        self.on_answer = on_answer
        self.retry_until = retry_until  # a time.monotonic() deadline after which nothing is retried
        self._remaining: int | None = None
        self._credentials = {
            "Username": settings.username,
            "Password": encode_password(settings.password.get_secret_value(), settings.appkey.get_secret_value()),
        }

    @property
    def remaining_searches(self) -> int | None:
        """The searches left according to the latest response that reported them."""
        return self._remaining

    def timeout(self) -> httpx.Timeout:
        t = self.settings.timeout_s
        return httpx.Timeout(t, connect=min(10.0, t), pool=t)

    def http_options(self, connections: int) -> dict[str, Any]:
        """What every httpx client of ours shares: headers, explicit timeouts, a bounded pool."""
        return {
            "headers": self.headers(),
            "timeout": self.timeout(),
            "limits": httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
            "verify": tls_context(),
        }

    def headers(self) -> dict[str, str]:
        return {"Accept": ACCEPT[self.settings.format], "User-Agent": USER_AGENT}

    def request_parts(self, call: Call) -> tuple[str, str, dict[str, str], dict[str, str]]:
        url = f"{self.base_url}/api/{calls.segment(self.settings.appname)}/{call.path}"
        params = dict(call.params)
        headers: dict[str, str] = {}
        if call.authenticated:
            if not self.settings.username or not self.settings.password:
                raise ConfigError("TOURNEYLAKE_USERNAME and TOURNEYLAKE_PASSWORD must be set for authenticated calls")
            if self.settings.credentials_in == "query":
                params.update(self._credentials)
            else:
                headers.update(self._credentials)
        if call.content is not None:
            headers["Content-Type"] = "text/plain; charset=utf-8"
        return call.method, url, params, headers

    def read(
        self,
        call: Call,
        response: httpx.Response,
        fetched_at: datetime,
        attempt: int,
        *,
        body_saved: bool = False,
        status_hook: BodyStatus | None = None,
        tree: bool = True,
    ) -> ApiResponse:
        """Check the status, hand the body to ``on_body`` (unless the caller already did:
        ``body_saved``, with its ``status_hook``), parse it, and tell the hook what it was.
        ``tree=False``: the caller needs only the envelope and the body, so an answer that
        plainly succeeded is read for its envelope alone (:func:`read_accepted_envelope`)."""
        status = response.status_code
        if status in (404, 405):
            raise MalformedCallError(status, f"/api/…/{call.path}", resource=call.resource)
        if status >= 500 or status == 429:
            retry_after = retry_after_seconds(response.headers.get("retry-after"))
            asked = f" (it asked to retry after {retry_after:g} s)" if retry_after is not None else ""
            raise TransportError(
                f"HTTP {status} from the service for {call.describe()}{asked}", resource=call.resource, retry_after=retry_after
            )
        if status != 200:
            raise ApiError(f"unexpected HTTP {status} for {call.describe()}", resource=call.resource)
        body = response.content
        fmt = self.settings.format
        if self.on_body is not None and not body_saved:
            status_hook = self.on_body(ReceivedBody(call, body, fmt, fetched_at))
        envelope = None if tree or fmt != "json" else read_accepted_envelope(body)
        root: Node | None = None
        try:
            if envelope is None:
                root, envelope = read_answer(body, fmt, call.resource)
        except MalformedResponse as exc:
            _tell(status_hook, "malformed")
            raise MalformedResponse(f"{call.describe()}: {exc}", resource=call.resource) from None
        except UnusableResponse as exc:
            _tell(status_hook, "unusable")
            raise UnusableResponse(f"{call.describe()}: {exc}", resource=call.resource) from None
        if envelope.timestamp is not None:
            note_server_time(self.base_url, envelope.timestamp)
        if envelope.remaining_searches is not None:
            self._remaining = envelope.remaining_searches
            if not call.metered and envelope.success:
                _note_reading(self.account, envelope.remaining_searches)
        if not envelope.success:
            assert root is not None  # only an accepted answer is read for its envelope alone
            error = service_error(root, envelope, call.resource)
            _tell(status_hook, f"refused-{error.code}")
            raise error
        _tell(status_hook, "ok")
        return ApiResponse(call, envelope, root, body, fmt, fetched_at, attempt)

    def prepare(self, call: Call, number: int) -> tuple[tuple[str, str, dict[str, str], dict[str, str]], Future[None] | None]:
        """Ask the gate (budget) for permission, then build the request. Returns the request and
        the gate's write that must be done before it goes out (or ``None``)."""
        written = self.before_attempt(call, number) if self.before_attempt is not None else None
        if call.metered:  # the count is about to change: no reading from before it stands
            _forget_reading(self.account)
        return self.request_parts(call), written

    def confirm(self, call: Call, number: int) -> None:
        """A try whose write-ahead line took a while is about to go out: the gate may withdraw it
        (raising, the budget's refusal) when the budget stopped meanwhile."""
        if self.confirm_attempt is not None:
            self.confirm_attempt(call, number)

    def answered(self, call: Call, number: int) -> None:
        """An answer to this try arrived (any status), before anything reads it."""
        _note_reached(self.base_url)
        if self.on_answer is not None:
            self.on_answer(call, number)

    def check_reachable(self, call: Call) -> None:
        """Fail at once a call to a service this process found unreachable a moment ago (the
        night's other first calls need not wait for the same verdict again)."""
        found = unreachable_lately(self.base_url)
        if found is not None:
            raise ServiceUnreachable(f"{call.describe()}: {found}", resource=call.resource)

    def unreachable(self, call: Call, error: TransportError) -> ApiError:
        """``error`` once the call's tries are spent: when no connection was ever made to a
        service that has not answered this process, that the base URL is wrong, naming the setting."""
        if error.connect is None or _reached(self.base_url):
            return error
        reason = (
            f"cannot reach the service at {redact(self.base_url)} ({error.connect}): check TOURNEYLAKE_BASE_URL (and the network)"
        )
        _note_unreachable(self.base_url, reason)
        return ServiceUnreachable(f"{call.describe()}: {reason}", resource=call.resource)

    @property
    def account(self) -> tuple[str, str, str]:
        return _account(self.settings, self.base_url)

    def finish(
        self,
        call: Call,
        response: httpx.Response | httpx.HTTPError,
        number: int,
        started: datetime,
        t0: float,
        *,
        body_saved: bool = False,
        status_hook: BodyStatus | None = None,
        pending: list[Future[Any] | asyncio.Future[Any]] | None = None,
        tree: bool = True,
    ) -> ApiResponse:
        """Read the response (or the transport failure), record the attempt, return or raise.
        The attempt's ledger write is added to ``pending`` for the caller to wait for, or waited
        for here when there is no ``pending``."""
        try:
            if isinstance(response, httpx.HTTPError):
                raise _transport_error(call, response)
            result = self.read(call, response, started, number, body_saved=body_saved, status_hook=status_hook, tree=tree)
        except ApiError as exc:
            self.record(call, number, started, t0, exc, None, pending)
            raise
        self.record(call, number, started, t0, None, result.remaining_searches, pending)
        return result

    def record(
        self,
        call: Call,
        number: int,
        started: datetime,
        t0: float,
        error: BaseException | None,
        remaining: int | None,
        pending: list[Future[Any] | asyncio.Future[Any]] | None = None,
    ) -> None:
        if self.on_attempt is None:
            return
        code: int | None = None
        if error is None:
            outcome = "ok"
        elif isinstance(error, ServiceError):
            outcome, code, remaining = "service_error", error.code, error.remaining_searches
        elif isinstance(error, MalformedResponse):
            outcome = "malformed_response"
        elif isinstance(error, UnusableResponse):
            outcome = "unusable_response"
        elif isinstance(error, MalformedCallError):
            outcome = "malformed_call"
        else:
            outcome = "transport_error"
        written = self.on_attempt(
            Attempt(
                call=call,
                number=number,
                started_at=started,
                duration_s=time.perf_counter() - t0,
                outcome=outcome,
                error_code=code,
                remaining_after=remaining,
                error=None if error is None else redact(str(error)),
            )
        )
        if written is not None:
            if pending is None:
                written.result()
            else:
                pending.append(written)

    def retry_kwargs(self) -> dict[str, Any]:
        s = self.settings
        stop = tenacity.stop_after_attempt(s.max_attempts) | tenacity.stop_after_delay(s.retry_max_total_s)
        if self.retry_until is not None:
            stop = stop | _StopAt(self.retry_until)
        backoff = tenacity.wait_exponential_jitter(
            multiplier=s.retry_initial_wait_s, jitter=s.retry_initial_wait_s, max=s.retry_max_wait_s
        )
        return dict(
            stop=stop | _StopUnreachable(self.base_url),
            wait=_HonourRetryAfter(backoff, s.retry_max_total_s),
            retry=tenacity.retry_if_exception(lambda e: isinstance(e, ApiError) and e.retryable),
            before_sleep=self._say_retrying,
            reraise=True,
        )

    def _say_retrying(self, retry_state: tenacity.RetryCallState) -> None:
        """One line, at a call's first retry, when no connection could be made to a service that
        has not answered yet (a wrong URL, the network down): not 80 seconds of silence."""
        error = retry_state.outcome.exception() if retry_state.outcome is not None else None
        if (
            retry_state.attempt_number == 1
            and isinstance(error, TransportError)
            and error.connect
            and not _reached(self.base_url)
        ):
            log.warning(
                "cannot reach the service at %s (%s): trying again for up to %g s",
                redact(self.base_url),
                error.connect,
                UNREACHABLE_AFTER_S,
            )


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header (delta-seconds or an HTTP date) as seconds from now, ``None`` when
    absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


class _HonourRetryAfter(tenacity.wait.wait_base):
    """The backoff, or longer when the service said how long to wait (``Retry-After`` on a 429
    or 503), at most ``longest`` seconds."""

    def __init__(self, backoff: tenacity.wait.wait_base, longest: float) -> None:
        self.backoff = backoff
        self.longest = longest

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        wait = self.backoff(retry_state)
        error = retry_state.outcome.exception() if retry_state.outcome is not None else None
        asked = getattr(error, "retry_after", None)
        return max(wait, min(asked, self.longest)) if asked is not None else wait


#: A service that has not answered this process is given up after this long of failed
#: connections (a wrong URL says so within seconds, not after every retry a slow service gets)...
UNREACHABLE_AFTER_S = 10.0
#: ...and for this long afterwards every call to it fails at once.
UNREACHABLE_MEMORY_S = 60.0


class _StopUnreachable(tenacity.stop.stop_base):
    """Stop retrying a call whose connections fail, to a service that has not answered this
    process, after :data:`UNREACHABLE_AFTER_S`."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        error = retry_state.outcome.exception() if retry_state.outcome is not None else None
        if not isinstance(error, TransportError) or error.connect is None or _reached(self.base_url):
            return False
        return (retry_state.seconds_since_start or 0.0) >= UNREACHABLE_AFTER_S


class _StopAt(tenacity.stop.stop_base):
    """Stop retrying once the clock (``time.monotonic``) passes a deadline: the run's retry window."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return time.monotonic() >= self.deadline


async def _finished(future: Future[None]) -> None:
    """Wait for another thread's work; work already done (a ledger line its caller wrote)
    without a round through the event loop."""
    if future.done():
        future.result()
    else:
        await asyncio.wrap_future(future)


def _failure(future: Future[Any] | asyncio.Future[Any]) -> BaseException | None:
    """A finished future's error, or its cancellation."""
    try:
        return future.exception()
    except BaseException as exc:  # noqa: BLE001 - cancelled: that is what it ended with
        return exc


def _tell(hook: BodyStatus | None, status: str) -> None:
    if hook is not None:
        hook(status)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default TLS context, built once for every client of the process (httpx would
    build it and load the CA bundle anew for each client; a night opens several)."""
    return httpx.create_ssl_context()


def _transport_error(call: Call, exc: httpx.HTTPError) -> TransportError:
    kind = "timed out" if isinstance(exc, httpx.TimeoutException) else type(exc).__name__
    # No connection made (refused, no such host, no route, connecting timed out): the request
    # never reached the service. Said so once the tries are spent (`_Protocol.unreachable`).
    connect = redact(f"{type(exc).__name__}: {exc}") if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout) else None
    return TransportError(redact(f"{call.describe()}: {kind}: {exc}"), resource=call.resource, connect=connect)


class _Resources:
    """One method per resource, shared by both clients (``send`` differs)."""

    def send(self, call: Call, **kw: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def metadata(self, hash: str | None = None, **kw: Any) -> Any:
        return self.send(calls.metadata(hash), **kw)

    def countries(self, **kw: Any) -> Any:
        return self.send(calls.countries(), **kw)

    def whats_new(self, limit: int | None = None, **kw: Any) -> Any:
        return self.send(calls.whats_new(limit), **kw)

    def natural_language_filter(self, question: str, timezone: str | None = None, locale: str | None = None, **kw: Any) -> Any:
        return self.send(calls.natural_language_filter(question, timezone, locale), **kw)

    def hand_analysis(self, hand_history: str | bytes, lang_code: str | None = None, **kw: Any) -> Any:
        return self.send(calls.hand_analysis(hand_history, lang_code), **kw)

    def player_summary(self, network: str, player: str, filter: str | None = None, **kw: Any) -> Any:
        return self.send(calls.player_summary(network, player, filter), **kw)


class Client(_Resources):
    """Blocking client; use as a context manager so its connection pool is closed."""

    def __init__(
        self,
        settings: Settings,
        *,
        base_url: str | None = None,
        on_body: BodyHook | None = None,
        on_attempt: AttemptHook | None = None,
        before_attempt: GateHook | None = None,
        on_answer: AnswerHook | None = None,
        retry_until: float | None = None,
        transport: httpx.BaseTransport | None = None,
        confirm_attempt: AnswerHook | None = None,
    ) -> None:
        self.protocol = _Protocol(
            settings, base_url, on_body, on_attempt, before_attempt, retry_until, on_answer, confirm_attempt
        )
        self._http = httpx.Client(**self.protocol.http_options(settings.concurrency), transport=transport)

    @property
    def remaining_searches(self) -> int | None:
        return self.protocol.remaining_searches

    def send(self, call: Call, **_: Any) -> ApiResponse:
        """Send a prepared :class:`Call` (see :mod:`tourneylake.api.calls`)."""
        protocol = self.protocol
        protocol.check_reachable(call)
        try:
            return self._send(call)
        except TransportError as exc:
            raise protocol.unreachable(call, exc) from None

    def _send(self, call: Call) -> ApiResponse:
        protocol = self.protocol
        number = 0
        for attempt in tenacity.Retrying(**protocol.retry_kwargs()):
            with attempt:
                number += 1
                (method, url, params, headers), written = protocol.prepare(call, number)
                if written is not None:
                    written.result()  # the ledger's write-ahead line, before the call goes out
                started, t0 = datetime.now(UTC), time.perf_counter()
                try:
                    response: httpx.Response | httpx.HTTPError = self._http.request(
                        method, url, params=params, headers=headers, content=call.content
                    )
                except httpx.HTTPError as exc:
                    response = exc
                else:
                    protocol.answered(call, number)
                return protocol.finish(call, response, number, started, t0)
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# A refused level is tried again after this many quiet probe periods (5 minutes at the default 10 s):
# one free objection now and then, in case the account's allowance grew.
CEILING_PROBE_PERIODS = 30


class AdaptiveLimit:
    """At most ``limit`` requests in flight, adapted to what the account is allowed (AIMD).

    When the service objects to parallel sessions (101024) the limit is halved (down to 1) and
    the level that was refused becomes a ceiling; after ``probe_after_s`` without an objection it
    rises by one, up to that ceiling. So a client configured for 8 against an account allowed 3
    settles at 3 instead of staying at 1. The ceiling itself rises by one after a much longer
    quiet spell (thirty probe periods), so an allowance that grew is found again; never above the
    configured ``maximum``."""

    def __init__(self, maximum: int, probe_after_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.maximum = maximum
        self.limit = maximum
        self.ceiling = maximum
        self.probe_after_s = probe_after_s
        self.in_flight = 0
        self.admitted: Counter[int] = Counter()  # requests admitted at each limit
        self._clock = clock
        self._changed_at = clock()
        self._ceiling_at = self._changed_at
        self._wakeup = asyncio.Condition()

    async def __aenter__(self) -> None:
        async with self._wakeup:
            before = self.limit
            self._probe()
            if self.limit > before:
                self._wakeup.notify(self.limit - before)  # the places the limit gained
            await self._wakeup.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1
            self.admitted[self.limit] += 1

    async def __aexit__(self, *exc: object) -> None:
        async with self._wakeup:
            self.in_flight -= 1
            self._wakeup.notify()  # one place freed: one waiter (every waiter waits for the same thing)

    async def lend(self, waiting: Awaitable[T]) -> T:
        """Give a held place up while ``waiting`` runs, then take one again (within the limit):
        the place is another request's meanwhile. A failure (or cancellation) of ``waiting``
        takes the place back at once, for the caller's exit to give up."""
        async with self._wakeup:
            self.in_flight -= 1
            self._wakeup.notify()
        try:
            result = await waiting
        except BaseException:
            self.in_flight += 1
            raise
        async with self._wakeup:
            try:
                await self._wakeup.wait_for(lambda: self.in_flight < self.limit)
            finally:
                self.in_flight += 1
        return result

    def refused(self, at_limit: int) -> None:
        """The service refused a request sent while the limit was ``at_limit`` (101024)."""
        now = self._clock()
        if at_limit <= self.limit:  # the first objection at this level (later ones are its echoes)
            self.ceiling = max(1, min(self.ceiling, at_limit - 1))
            self._ceiling_at = now
            new = max(1, self.limit // 2)
            if new < self.limit:
                log.warning("the service refused parallel sessions (101024): concurrency lowered to %d", new)
            self.limit = new
        self._changed_at = now

    def _probe(self) -> None:
        now = self._clock()
        if now - self._ceiling_at >= CEILING_PROBE_PERIODS * self.probe_after_s and self.ceiling < self.maximum:
            self.ceiling += 1
            self._ceiling_at = now
        if self.limit < self.ceiling and now - self._changed_at >= self.probe_after_s:
            self.limit += 1
            self._changed_at = now
            log.info("no objection to parallel sessions for %g s: concurrency raised to %d", self.probe_after_s, self.limit)


#: ``aiohttp`` (the default: aiohttp directly, see :class:`_AiohttpLane`), ``httpx-aiohttp``
#: (httpx over ``httpx_aiohttp.AiohttpTransport``, when installed) or ``httpcore`` (httpx's own).
HTTP_BACKEND_ENV = "TOURNEYLAKE_HTTP_BACKEND"


# The searches left the latest free answer of each account (base URL, app, user) reported in this
# process, and when (monotonic seconds); a metered call of the account forgets it before it is
# sent. See `recent_reading`.
_READINGS: dict[tuple[str, str, str], tuple[int, float]] = {}
_READINGS_LOCK = threading.Lock()


def _account(settings: Settings, base_url: str | None) -> tuple[str, str, str]:
    """Whose searches a count is: the service (its root), the application, the user."""
    return ((base_url or settings.base_url).rstrip("/"), settings.appname, settings.username)


def _note_reading(account: tuple[str, str, str], remaining: int) -> None:
    with _READINGS_LOCK:
        _READINGS[account] = (remaining, time.monotonic())


def _forget_reading(account: tuple[str, str, str]) -> None:
    with _READINGS_LOCK:
        _READINGS.pop(account, None)


# The services (by their root) that answered this process, and those found unreachable, with
# why and when (monotonic seconds). See `_Protocol.unreachable`.
_REACHED: set[str] = set()
_UNREACHABLE: dict[str, tuple[str, float]] = {}


def _note_reached(base_url: str) -> None:
    if base_url not in _REACHED:
        with _READINGS_LOCK:
            _REACHED.add(base_url)
            _UNREACHABLE.pop(base_url, None)


def _reached(base_url: str) -> bool:
    return base_url in _REACHED


def _note_unreachable(base_url: str, reason: str) -> None:
    with _READINGS_LOCK:
        _UNREACHABLE[base_url] = (reason, time.monotonic())


def unreachable_lately(base_url: str) -> str | None:
    """Why the service at ``base_url`` was found unreachable in this process, within the last
    :data:`UNREACHABLE_MEMORY_S` (``None`` if it was not)."""
    with _READINGS_LOCK:
        found = _UNREACHABLE.get(base_url.rstrip("/"))
    if found is None or time.monotonic() - found[1] > UNREACHABLE_MEMORY_S:
        return None
    return found[0]


def recent_reading(settings: Settings, base_url: str | None, within_s: float) -> int | None:
    """The searches left as a free answer of this account reported at most ``within_s`` seconds
    ago in this process, with no metered call of it since (``None`` if there is none): as good
    as a new reading but for what another client spent in those seconds, which the next
    answers' counts show."""
    with _READINGS_LOCK:
        found = _READINGS.get(_account(settings, base_url))
    if found is None or time.monotonic() - found[1] > within_s:
        return None
    return found[0]


def warm_async_transport() -> None:
    """Start importing aiohttp on a thread, once per process: a night's first steps (and the
    harvest's searches-left reading) mostly wait on the network, so its ~0.2 s of first import
    no longer holds back the night's first searches. Does nothing when it is loaded or is not
    the backend the async client will use; a failure there only means the client imports it
    when it needs it."""
    global _WARMING
    with _WARMING_LOCK:
        if _WARMING or "aiohttp" in sys.modules or os.environ.get(HTTP_BACKEND_ENV, "aiohttp") != "aiohttp":
            return
        _WARMING = True
    if importlib.util.find_spec("aiohttp") is not None:
        threading.Thread(target=_import_quietly, args=("aiohttp",), name="tourneylake-import", daemon=True).start()


_WARMING = False
_WARMING_LOCK = threading.Lock()


def _import_quietly(name: str) -> None:
    with contextlib.suppress(Exception):
        importlib.import_module(name)


def _env_proxy_for(url: str) -> bool:
    """Whether the environment names a proxy for ``url`` (httpx honours it; the aiohttp lane,
    which does not look at the environment per request, then stands aside)."""
    import urllib.request

    proxies = urllib.request.getproxies()
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0].rsplit(":", 1)[0]
    return bool(proxies.get(scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(host)


class _AiohttpLane:
    """What :class:`AsyncClient` needs of an httpx client (``request`` giving an ``httpx.Response``
    with the whole body, ``aclose``), done with one ``aiohttp.ClientSession`` whose pool holds a
    connection per slot. httpx's own machinery (URL parsing and merging, models, the transport
    layers) cost about as much CPU per request as aiohttp's whole exchange; this skips it. Every
    failure arrives as the ``httpx`` exception the httpcore transport would raise, so the
    protocol's handling (what is retried, the messages) is the same."""

    def __init__(self, protocol: _Protocol, connections: int) -> None:
        self.headers = protocol.headers()
        self.connections = connections
        t = protocol.settings.timeout_s
        self.timeouts = (min(10.0, t), t)
        self.session: Any = None

    def _open(self) -> Any:
        import aiohttp

        connect, read = self.timeouts
        connector = aiohttp.TCPConnector(limit=self.connections, ssl=tls_context(), keepalive_timeout=5.0)
        # trust_env=False: aiohttp would read the proxy variables on every request;
        # the client uses httpx instead when they name a proxy (see _env_proxy_for).
        return aiohttp.ClientSession(
            connector=connector,
            headers=self.headers,
            timeout=aiohttp.ClientTimeout(total=None, connect=read, sock_connect=connect, sock_read=read),
            trust_env=False,
            auto_decompress=True,
        )

    async def request(
        self, method: str, url: str, *, params: dict[str, str], headers: dict[str, str], content: bytes | None
    ) -> httpx.Response:
        import aiohttp

        if self.session is None:
            self.session = self._open()  # inside the running loop, on first use
        try:
            async with self.session.request(
                method, url, params=params, headers=headers, data=content, allow_redirects=False
            ) as response:
                body = await response.read()
                # aiohttp has decoded a gzip/deflate body already: httpx must not decode it again.
                kept = [(k, v) for k, v in response.raw_headers if k.lower() != b"content-encoding"]
                return httpx.Response(response.status, headers=kept, content=body)
        except aiohttp.ConnectionTimeoutError as exc:
            raise httpx.ConnectTimeout(_described(exc)) from None
        except TimeoutError as exc:
            raise httpx.ReadTimeout(_described(exc)) from None
        except aiohttp.ClientConnectorError as exc:
            raise httpx.ConnectError(_described(exc)) from None
        except aiohttp.ServerDisconnectedError as exc:
            raise httpx.RemoteProtocolError(_described(exc)) from None
        except (aiohttp.ClientError, OSError) as exc:  # a body cut short, a reset, a bad status line
            raise httpx.ReadError(_described(exc)) from None

    async def aclose(self) -> None:
        if self.session is not None:
            await self.session.close()


_QUERY = re.compile(r"\?[^\s'\"]*")


def _described(exc: BaseException) -> str:
    """An aiohttp failure in one line, without any query string (credentials may travel in
    one: TOURNEYLAKE_CREDENTIALS_IN=query), and without chaining the original, which holds the
    request's URL."""
    return _QUERY.sub("?…", f"{type(exc).__name__}: {exc}")


def _httpx_aiohttp_transport(connections: int) -> httpx.AsyncBaseTransport | None:
    """httpx over ``httpx-aiohttp``'s transport (for comparison: ``TOURNEYLAKE_HTTP_BACKEND=httpx-aiohttp``)."""
    try:
        import aiohttp
        from httpx_aiohttp import AiohttpTransport
    except ImportError:
        return None
    context = tls_context()

    def session() -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=connections, ssl=context, keepalive_timeout=5.0)
        return aiohttp.ClientSession(connector=connector, trust_env=False)

    return AiohttpTransport(client=session, verify=context)


class AsyncClient(_Resources):
    """Asynchronous client; at most ``settings.concurrency`` requests in flight at once (the
    service polices parallel sessions per account: error 101024).

    Each 200 body is saved by ``body_saver`` (a night's harvest: :class:`tourneylake.lake.raw_saver.RawSaver`,
    another process) or else ``on_body`` runs on a small worker-thread pool, not on the event
    loop: saving a body (file writes, fsync) would otherwise stall every other request in flight.
    Each call still awaits the save before parsing the body, so the promise holds (a 200 body is
    handed over, and for the lake written, before it is parsed); the hook must be thread-safe.
    The client closes its saver.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        base_url: str | None = None,
        on_body: BodyHook | None = None,
        on_attempt: AttemptHook | None = None,
        before_attempt: GateHook | None = None,
        on_answer: AnswerHook | None = None,
        retry_until: float | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        body_saver: BodySaver | None = None,
        confirm_attempt: AnswerHook | None = None,
    ) -> None:
        self.protocol = _Protocol(
            settings, base_url, on_body, on_attempt, before_attempt, retry_until, on_answer, confirm_attempt
        )
        self._slots = AdaptiveLimit(settings.concurrency, settings.concurrency_probe_s)
        self._saver = body_saver
        if body_saver is None and on_body is not None:
            self._saver = _PoolSaver(on_body, min(settings.concurrency, 4))
        # aiohttp (one session, a connection per slot) unless a transport is given (tests), the
        # environment names a proxy, or TOURNEYLAKE_HTTP_BACKEND says otherwise. httpcore: one
        # single-connection httpx client per slot ("lanes"): httpcore's pool checks every idle
        # connection with a poll() on each request, a cost that grows with the pool; a lane only
        # ever looks at its own connection (2,000 summaries at 16 slots: 17 s -> 9-11 s).
        backend = os.environ.get(HTTP_BACKEND_ENV, "aiohttp") if transport is None else "transport"
        if backend == "aiohttp" and (importlib.util.find_spec("aiohttp") is None or _env_proxy_for(self.protocol.base_url)):
            backend = "httpcore"
        if backend == "httpx-aiohttp":
            transport = _httpx_aiohttp_transport(settings.concurrency)
            backend = "httpcore" if transport is None else backend
        self.backend = backend
        self._lanes: asyncio.Queue[Any] = asyncio.Queue()
        self._all_lanes: list[Any]
        if backend == "aiohttp":
            self._all_lanes = [_AiohttpLane(self.protocol, settings.concurrency)]
        elif backend == "httpcore":
            self._all_lanes = [httpx.AsyncClient(**self.protocol.http_options(1)) for _ in range(settings.concurrency)]
        else:
            self._all_lanes = [httpx.AsyncClient(**self.protocol.http_options(settings.concurrency), transport=transport)]
        for lane in self._all_lanes:
            self._lanes.put_nowait(lane)

    @property
    def remaining_searches(self) -> int | None:
        return self.protocol.remaining_searches

    @property
    def concurrency(self) -> int:
        """The concurrency most requests were sent at (lower than configured when the service
        objected to parallel sessions: see :class:`AdaptiveLimit`)."""
        admitted = self._slots.admitted
        return max(admitted, key=admitted.__getitem__) if admitted else self._slots.limit

    async def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        if len(self._all_lanes) == 1:  # one client whose pool holds every slot's connection: shared
            return await self._all_lanes[0].request(method, url, **kwargs)
        lane = await self._lanes.get()
        try:
            return await lane.request(method, url, **kwargs)
        finally:
            self._lanes.put_nowait(lane)

    async def send(self, call: Call, *, tree: bool = True, **_: Any) -> ApiResponse:
        """Send a prepared :class:`Call` (see :mod:`tourneylake.api.calls`). ``tree=False``: the
        caller uses the answer's envelope and body, not its tree (see :meth:`_Protocol.read`)."""
        self.protocol.check_reachable(call)
        try:
            return await self._send(call, tree)
        except TransportError as exc:
            raise self.protocol.unreachable(call, exc) from None

    async def _send(self, call: Call, tree: bool) -> ApiResponse:
        protocol = self.protocol
        number = 0
        async for attempt in tenacity.AsyncRetrying(**protocol.retry_kwargs()):
            with attempt:
                number += 1
                async with self._slots:
                    at_limit = self._slots.limit
                    # The gate is asked once a slot is free, right before sending: a budget stop
                    # reaches every call still waiting for a slot.
                    (method, url, params, headers), written = protocol.prepare(call, number)
                    if written is not None and not written.done():
                        # The ledger's write-ahead line is being stored (an object store's group
                        # commit): the slot is another call's meanwhile, taken again once the line
                        # is kept; a budget stop since the gate withdraws the call then.
                        await self._slots.lend(_finished(written))
                        protocol.confirm(call, number)
                    elif written is not None:  # the ledger's write-ahead line, written by its caller
                        written.result()
                    started, t0 = datetime.now(UTC), time.perf_counter()
                    try:
                        response: httpx.Response | httpx.HTTPError = await self._request(
                            method, url, params=params, headers=headers, content=call.content
                        )
                    except httpx.HTTPError as exc:
                        response = exc
                    else:
                        protocol.answered(call, number)
                    saved, status_hook = False, None
                    settling: list[Future[Any] | asyncio.Future[Any]] = []
                    # The slot is given up once a paid body is kept, not when it arrives: a process
                    # killed at any moment has at most its slots' calls paid and not kept.
                    if self._saver is not None and isinstance(response, httpx.Response) and response.status_code == 200:
                        body = ReceivedBody(call, response.content, protocol.settings.format, started)
                        settle = await self._saver.save(body)
                        status_hook = None if settle is None else lambda status: settling.append(settle(status))  # noqa: B023
                        saved = True
                try:
                    return protocol.finish(
                        call, response, number, started, t0,
                        body_saved=saved, status_hook=status_hook, pending=settling, tree=tree,
                    )  # fmt: skip
                except LoggedInElsewhere:
                    self._slots.refused(at_limit)
                    raise
                finally:  # the body is named by its status, and the attempt is in the ledger, before its caller hears of it
                    if settling:  # the ledger's and the saver's: all of them, whichever fails
                        waiting = [asyncio.wrap_future(f) for f in settling if not f.done()]
                        if waiting:  # gather: a cancelled caller stops waiting for them (the work is done all the same)
                            await asyncio.gather(*waiting, return_exceptions=True)
                        failed = next(filter(None, map(_failure, settling)), None)
                        if failed is not None:
                            raise failed
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        try:
            for lane in self._all_lanes:
                await lane.aclose()
        finally:
            if self._saver is not None:
                await self._saver.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
