"""What can go wrong talking to the service, as a class hierarchy keyed on ``Error/@id``.

Match on the class (or ``code``), never on the text: the service localises it.

- :class:`CredentialsError` (1010xx): stop, never retry.
- :class:`QuotaError` / :class:`SubscriptionError` (1020xx): stop metered calls for the run.
- :class:`InternalServiceError` (0) and :class:`LoggedInElsewhere` (101024): retried with backoff.
- :class:`MalformedCallError`: HTTP 404/405, our request was not correctly formed.
- :class:`TransportError`: timeouts, 5xx, dropped connections, bodies cut short — retried;
  :class:`ServiceUnreachable` when no connection was ever made (a wrong base URL) — not.
- :class:`UnusableResponse`: a complete answer that can never be read (a DTD refused for safety,
  no service envelope): asking again would pay again for the same, so it is never retried.
- :class:`NotFoundError` (:data:`NOT_FOUND_CODES`): the player (or player group) asked for is not
  found. The one place that lists those codes: the harvest skips such a pair (free) until its
  weekly retry, the ledger books it as a lookup without data, and ``coverage_changes`` records a
  player the lake held before.
"""

from __future__ import annotations

from tourneylake.errors import TourneylakeError


class ApiError(TourneylakeError):
    """A call to the service did not give usable data."""

    retryable = False

    def __init__(self, message: str, *, resource: str | None = None) -> None:
        super().__init__(message)
        self.resource = resource


class ServiceError(ApiError):
    """The service answered ``success="false"`` with an ``Error``. ``remaining_searches``: the
    account's searches left, as the answer's envelope tells them (``None`` when it does not)."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        resource: str | None = None,
        remaining_searches: int | None = None,
    ) -> None:
        self.code = code
        self.service_message = message
        self.remaining_searches = remaining_searches
        super().__init__(f"service error {code}: {message}", resource=resource)


class CredentialsError(ServiceError):
    """1010xx: the user, password or request identity was refused. Never retried."""


class RequestRejected(ServiceError):
    """1010xx codes about the request itself (no User-Agent, invalid request information)."""


class LoggedInElsewhere(ServiceError):
    """101024: too many parallel sessions for this account; back off and retry."""

    retryable = True


class QuotaError(ServiceError):
    """1020xx: searches used up or too low. Stop metered calls for this run."""


class SubscriptionError(QuotaError):
    """102004/102005: the operation is for subscribers (or gold subscribers) only."""


class InternalServiceError(ServiceError):
    """Error 0: the service failed internally; retry later."""

    retryable = True


class UnknownServiceError(ServiceError):
    """A code we do not know; its id and text are kept."""


class NotFoundError(ServiceError):
    """The service could not find the player (or another entity) asked for."""


class MalformedCallError(ApiError):
    """HTTP 404 or 405: the call was not correctly formed (a bug on our side, never retried)."""

    def __init__(self, status_code: int, path: str, *, resource: str | None = None) -> None:
        self.status_code = status_code
        super().__init__(f"HTTP {status_code} for {path}: the call is not correctly formed", resource=resource)


class TransportError(ApiError):
    """The exchange itself failed: timeout, connection, HTTP 5xx or 429, a body cut short.
    ``retry_after``: the seconds the service asked us to wait (``Retry-After``), when it did;
    ``connect``: why no connection could be made, when none was (the request never left)."""

    retryable = True

    def __init__(
        self, message: str, *, resource: str | None = None, retry_after: float | None = None, connect: str | None = None
    ) -> None:
        super().__init__(message, resource=resource)
        self.retry_after = retry_after
        self.connect = connect


class ServiceUnreachable(TransportError):
    """No connection to the service could be made, and it has not answered this process yet: the
    base URL (or the network) is wrong, not the service slow. Not retried further: the message
    names the setting."""

    retryable = False


class MalformedResponse(TransportError):
    """A 200 whose body was cut short (it ends mid-document): the next try may arrive whole."""


class UnusableResponse(ApiError):
    """A 200 whose complete body can never be read: a DTD or entities (refused for safety), a
    document that is no service envelope, nesting beyond any real answer. The service charged
    for it and would answer the same again, so it is kept raw, reported, and not retried."""


CREDENTIAL_CODES = {101001, 101002, 101003}
REQUEST_CODES = {101011, 101012}
SUBSCRIPTION_CODES = {102004, 102005}
#: "Not found" for a player or a player group: 200039 is the code the service's public material
#: gives; 103001 is what the sandbox answered before it learned that, kept so both are read alike.
NOT_FOUND_CODES = frozenset({103001, 200039})


def error_for_code(code: int, message: str, *, resource: str | None, remaining_searches: int | None) -> ServiceError:
    """The :class:`ServiceError` subclass for an ``Error/@id``."""
    cls: type[ServiceError]
    if code == 0:
        cls = InternalServiceError
    elif code == 101024:
        cls = LoggedInElsewhere
    elif code in REQUEST_CODES:
        cls = RequestRejected
    elif code in CREDENTIAL_CODES or 101000 <= code < 102000:
        cls = CredentialsError
    elif code in SUBSCRIPTION_CODES:
        cls = SubscriptionError
    elif 102000 <= code < 103000:
        cls = QuotaError
    elif code in NOT_FOUND_CODES:
        cls = NotFoundError
    else:
        cls = UnknownServiceError
    return cls(code, message, resource=resource, remaining_searches=remaining_searches)
