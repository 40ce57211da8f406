"""The response envelope as typed values (``docs/concepts/service.md``, The envelope).

Every field is tolerated when absent: the real ``/metadata`` response carries no ``UserInfo``
and no real sample carries ``appVersion``.

A value out of range (an epoch beyond the year 9999, a count beyond 64 bits) reads as ``None``
with a logged warning, never as a wrong value; structural garbage (an object where a value must
be) raises :class:`~tourneylake.api.tree.MalformedPayload` from the tree. :func:`read_envelope`
raises only :class:`MalformedEnvelope` or another ``MalformedPayload``; :func:`service_error`
never raises (it is called where only a service error is expected).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from tourneylake.api.errors import ServiceError, error_for_code
from tourneylake.api.tree import MalformedPayload, Node, element_path

log = logging.getLogger(__name__)

_INT64 = (-(2**63), 2**63 - 1)


class MalformedEnvelope(MalformedPayload):
    """A parsed body that is no service envelope (no ``Response`` root, no ``success``). A
    :class:`~tourneylake.api.tree.MalformedPayload`, like everything a reader of a body raises:
    the client tells a body cut short (retried) from a complete unreadable one by the body."""


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
        reports the anonymous allowance, not the account's, which must never move the budget."""
        info = self.user_info
        return info.remaining_searches if info is not None and info.logged_in else None


def epoch_to_utc(value: str | None) -> datetime | None:
    """Epoch seconds (as the service writes them) to an aware UTC datetime; ``None`` (with a
    warning) for one that is no number or lies outside the years 1–9999."""
    if value is None or value == "":
        return None
    try:
        return datetime.fromtimestamp(int(float(value)), tz=UTC)
    except (ValueError, OverflowError, OSError):
        log.warning("an envelope time is not epoch seconds in range (%d characters); read as none", len(value))
        return None


def _int(value: str | None) -> int | None:
    """A decimal integer within 64 bits (what a ledger column holds), else ``None``."""
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:  # also a number of more than 4,300 digits (Python's limit)
        return None
    if not _INT64[0] <= number <= _INT64[1]:
        log.warning("an envelope number beyond 64 bits (%d digits); read as none", len(value))
        return None
    return number


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
    """The envelope of a parsed response; raises :class:`MalformedEnvelope` if it is not one
    (and the tree's :class:`~tourneylake.api.tree.MalformedPayload` for structural garbage in it)."""
    if root.name != "Response":
        raise MalformedEnvelope(f"expected a Response root element, got {element_path([root.name])!r}")
    success = _bool(root.attr("success"))
    if success is None:
        raise MalformedEnvelope("Response has no success attribute")
    return Envelope(
        success=success,
        timestamp=epoch_to_utc(root.attr("timestamp")),
        metadata_hash=root.attr("metadataHash"),
        app_version=root.attr("appVersion"),
        user_info=read_user_info(root.one("UserInfo")),
    )


def service_error(root: Node, envelope: Envelope, resource: str | None) -> ServiceError:
    """The error a ``success="false"`` response carries. Never raises: an ``Error`` it cannot
    read gives code -1 (callers use it where only a service error is expected)."""
    remaining = envelope.remaining_searches
    try:
        error = root.find("ErrorResponse/Error")
        if error is None:
            return error_for_code(
                -1, "the service reported a failure without an Error element", resource=resource, remaining_searches=remaining
            )
        code = _int(error.attr("id"))
        message = error.text or ""
    except MalformedPayload as exc:
        return error_for_code(
            -1, f"the service reported a failure with an unreadable Error: {exc}", resource=resource, remaining_searches=remaining
        )
    return error_for_code(code if code is not None else -1, message, resource=resource, remaining_searches=remaining)
