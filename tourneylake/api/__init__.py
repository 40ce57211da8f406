"""The service client: one tree shape for XML and JSON, typed envelope, errors by code.

No Dagster here: notebooks and scripts use it directly. The HTTP clients (httpx, aiohttp) are
imported on first use of a name that needs them, so what only reads answers (the tables worker,
a rebuild) never loads the HTTP stack.
"""

from typing import TYPE_CHECKING, Any

from tourneylake.api import calls
from tourneylake.api.answers import read_answer
from tourneylake.api.calls import DOCUMENTED_COSTS, Call

if TYPE_CHECKING:
    from tourneylake.api.client import (
        USER_AGENT,
        ApiResponse,
        AsyncClient,
        Attempt,
        Client,
        ReceivedBody,
        encode_password,
        redact,
    )
from tourneylake.api.envelope import Envelope, Region, UserInfo, epoch_to_utc, read_envelope
from tourneylake.api.errors import (
    ApiError,
    CredentialsError,
    InternalServiceError,
    LoggedInElsewhere,
    MalformedCallError,
    MalformedResponse,
    NotFoundError,
    QuotaError,
    RequestRejected,
    ServiceError,
    ServiceUnreachable,
    SubscriptionError,
    TransportError,
    UnknownServiceError,
    UnusableResponse,
)
from tourneylake.errors import TourneylakeError

__all__ = [
    "DOCUMENTED_COSTS",
    "USER_AGENT",
    "ApiError",
    "ApiResponse",
    "AsyncClient",
    "Attempt",
    "Call",
    "Client",
    "CredentialsError",
    "Envelope",
    "InternalServiceError",
    "LoggedInElsewhere",
    "MalformedCallError",
    "MalformedResponse",
    "NotFoundError",
    "QuotaError",
    "ReceivedBody",
    "Region",
    "RequestRejected",
    "ServiceError",
    "ServiceUnreachable",
    "SubscriptionError",
    "TourneylakeError",
    "TransportError",
    "UnknownServiceError",
    "UnusableResponse",
    "UserInfo",
    "calls",
    "encode_password",
    "epoch_to_utc",
    "read_answer",
    "read_envelope",
    "redact",
]

# Names of :mod:`tourneylake.api.client`, imported on first use (PEP 562).
_CLIENT_NAMES = frozenset(
    {"USER_AGENT", "ApiResponse", "AsyncClient", "Attempt", "Client", "ReceivedBody", "encode_password", "redact"}
)


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from tourneylake.api import client

        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
