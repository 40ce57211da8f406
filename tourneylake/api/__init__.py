"""The service client: one tree shape for XML and JSON, typed envelope, errors by code.

No Dagster here: notebooks and scripts use it directly.
"""

from tourneylake.api import calls
from tourneylake.api.calls import DOCUMENTED_COSTS, Call
from tourneylake.api.client import (
    USER_AGENT,
    ApiResponse,
    AsyncClient,
    Attempt,
    Client,
    ReceivedBody,
    encode_password,
    read_answer,
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
    SubscriptionError,
    TourneylakeError,
    TransportError,
    UnknownServiceError,
    UnusableResponse,
)

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
