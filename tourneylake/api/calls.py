"""The service's resources as values: what to send, what it costs, how to name it without secrets.

A :class:`Call` is built once and sent by either client; its ``key`` identifies the request in
the lake and the ledger and never holds credentials.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from urllib.parse import quote

# The service's documented costs: the budget's prior, corrected by what the service reports.
METADATA = "metadata"
COUNTRIES = "countries"
WHATS_NEW = "whats_new"
NATURAL_LANGUAGE_FILTER = "nlq"
HAND_ANALYSIS = "hand_analysis"
PLAYER_SUMMARY = "player_summary"

DOCUMENTED_COSTS: dict[str, int] = {
    METADATA: 0,
    COUNTRIES: 0,
    WHATS_NEW: 0,
    NATURAL_LANGUAGE_FILTER: 1,
    HAND_ANALYSIS: 5,
    PLAYER_SUMMARY: 1,
}


@dataclass(frozen=True, slots=True)
class Call:
    resource: str
    method: str
    path: str  # below /api/{appname}/, segments already URL-encoded
    params: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None
    authenticated: bool = False
    payload_name: str | None = None
    key: dict[str, str] = field(default_factory=dict)

    @property
    def metered(self) -> bool:
        return DOCUMENTED_COSTS.get(self.resource, 1) > 0

    def describe(self) -> str:
        """A one-line, secret-free description for messages."""
        detail = ", ".join(f"{k}={v}" for k, v in self.key.items() if v)
        return f"{self.resource}({detail})" if detail else self.resource


def segment(value: str) -> str:
    """One URL path segment: spaces, dots, parentheses and non-ASCII letters made safe."""
    return quote(value, safe="")


def metadata(hash: str | None = None) -> Call:
    """``hash``: our copy's; the key keeps it, so a "cached" answer says which copy it confirmed."""
    params = {"hash": hash} if hash else {}
    return Call(METADATA, "GET", "metadata", params, payload_name="MetadataResponse", key={"hash": hash or ""})


# Countries and What's New are free; credentials go with them anyway so that their UserInfo
# reports the searches left without spending one.
def countries(*, reading: bool = False) -> Call:
    """``reading``: the call is made to read the searches left, not for the countries table; its
    answer is kept under its own key so it never replaces the night's countries."""
    return Call(COUNTRIES, "GET", "metadata/countries", authenticated=True, key={"reading": "searches_left"} if reading else {})


def whats_new(limit: int | None = None) -> Call:
    params = {"limit": str(limit)} if limit is not None else {}
    return Call(WHATS_NEW, "GET", "news/whatsnew", params, authenticated=True, key={"limit": params.get("limit", "")})


def natural_language_filter(question: str, timezone: str | None = None, locale: str | None = None) -> Call:
    params = {"question": question}
    if timezone:
        params["timezone"] = timezone
    if locale:
        params["locale"] = locale
    return Call(
        NATURAL_LANGUAGE_FILTER,
        "GET",
        "filters/nlq",
        params,
        authenticated=True,
        key={"question": question, "timezone": timezone or "", "locale": locale or ""},
    )


def hand_analysis(hand_history: str | bytes, lang_code: str | None = None) -> Call:
    content = hand_history.encode("utf-8") if isinstance(hand_history, str) else hand_history
    params = {"langCode": lang_code} if lang_code else {}
    digest = hashlib.sha256(content).hexdigest()
    return Call(
        HAND_ANALYSIS,
        "POST",
        "handanalysis",
        params,
        content=content,
        authenticated=True,
        key={"hand_sha256": digest, "lang": lang_code or ""},
    )


def player_summary(
    network: str,
    player: str,
    filter: str | None = None,
    filter_name: str | None = None,
    *,
    written: str | None = None,
    window: str = "as_of",
    anchored: bool = False,
) -> Call:
    """``filter`` is sent; the rest only labels the request key, so the raw answer carries what
    its tables need: the watchlist's name for the filter, the filter as written (``written``,
    default: as sent), its window and whether the sent filter is anchored to the night."""
    params = {"filter": filter} if filter else {}
    return Call(
        PLAYER_SUMMARY,
        "GET",
        f"networks/{segment(network)}/players/{segment(player)}/summary",
        params,
        authenticated=True,
        payload_name="PlayerResponse",
        key={
            "network": network,
            "player": player,
            "filter": filter or "",
            "filter_name": filter_name or "",
            "written": filter or "" if written is None else written,
            "window": window,
            "anchored": "true" if anchored else "false",
        },
    )
