"""The response envelope as typed values (reference §2.1–2.2).

Every field is tolerated when absent: the real ``/metadata`` response carries no ``UserInfo``
and no real sample carries ``appVersion``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from tourneylake.api.errors import MalformedResponse, ServiceError, error_for_code
from tourneylake.tree import Node


@dataclass(frozen=True, slots=True)
class Region:
    name: str | None
    code: str | None


@dataclass(frozen=True, slots=True)
class UserInfo:
    logged_in: bool
    username: str | None
    regions: tuple[Region, ...]
    remaining_searches: int | None
    expiration_date: datetime | None
    request_languages: str | None
    authorized_networks_all: bool | None


@dataclass(frozen=True, slots=True)
class Envelope:
    success: bool
    timestamp: datetime | None
    metadata_hash: str | None
    app_version: str | None
    user_info: UserInfo | None

    @property
    def remaining_searches(self) -> int | None:
        """The account's searches left: only a ``loggedIn="true"`` UserInfo tells them; a
        logged-out one (a free call without credentials, a failed login, some error answers)
        reports the anonymous allowance (service-notes §5), which must never move the budget."""
        info = self.user_info
        return info.remaining_searches if info is not None and info.logged_in else None


def epoch_to_utc(value: str | None) -> datetime | None:
    """Epoch seconds (as the service writes them) to an aware UTC datetime."""
    if value is None or value == "":
        return None
    try:
        return datetime.fromtimestamp(int(float(value)), tz=UTC)
    except (ValueError, OverflowError, OSError):
        return None


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _bool(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() == "true"


def read_user_info(node: Node | None) -> UserInfo | None:
    if node is None:
        return None
    networks = node.one("AuthorizedNetworks")
    return UserInfo(
        logged_in=_bool(node.attr("loggedIn")) is True,
        username=node.child_text("Username"),
        regions=tuple(Region(r.attr("name"), r.attr("code")) for r in node.all("Regions")),
        remaining_searches=_int(node.child_text("RemainingSearches")),
        expiration_date=epoch_to_utc(node.child_text("ExpirationDate")),
        request_languages=node.child_text("RequestLanguages"),
        authorized_networks_all=_bool(networks.attr("all")) if networks is not None else None,
    )


def read_envelope(root: Node) -> Envelope:
    """The envelope of a parsed response; raises :class:`MalformedResponse` if it is not one."""
    if root.name != "Response":
        raise MalformedResponse(f"expected a Response root element, got {root.name!r}")
    success = _bool(root.attr("success"))
    if success is None:
        raise MalformedResponse("Response has no success attribute")
    return Envelope(
        success=success,
        timestamp=epoch_to_utc(root.attr("timestamp")),
        metadata_hash=root.attr("metadataHash"),
        app_version=root.attr("appVersion"),
        user_info=read_user_info(root.one("UserInfo")),
    )


def service_error(root: Node, envelope: Envelope, resource: str | None) -> ServiceError:
    """The error a ``success="false"`` response carries."""
    error = root.find("ErrorResponse/Error")
    if error is None:
        return error_for_code(-1, "the service reported a failure without an Error element", resource=resource, envelope=envelope)
    code = _int(error.attr("id"))
    return error_for_code(
        code if code is not None else -1,
        error.text or "",
        resource=resource,
        envelope=envelope,
    )
