"""The response envelope, ``UserInfo``, error bodies, and the player summary payload.

Bodies are written with :func:`tourneylake.api.tree.to_json` / :func:`~tourneylake.api.tree.to_xml` so
they carry the real mapping's quirks. Large payloads (metadata, summaries) are serialised once
and *spliced* into each request's small envelope (:func:`render`), so a request costs the
envelope, not the whole tree.
"""

from __future__ import annotations

from collections.abc import Sequence

from tourneylake.api import tree
from tourneylake.api.tree import Element
from tourneylake.sandbox.accounts import User
from tourneylake.sandbox.catalog import COUNTRY_NAMES
from tourneylake.sandbox.stats import RateOn, summarise
from tourneylake.sandbox.world import Result, money

__all__ = ["ERROR_TEXT", "envelope", "error_element", "fragment", "render", "summary_payload", "user_info"]

#: English descriptions of the error codes the sandbox sends: the service's documented ones, and
#: two for a player (or player group) the service does not find, 200039 (the code the service's
#: public material gives) and 103001 (an earlier choice of the sandbox's, still switchable).
ERROR_TEXT: dict[int, str] = {
    0: "Internal error, please try again later.",
    101001: "User not found.",
    101002: "Invalid password.",
    101003: "No username or password supplied.",
    101011: "User-Agent header not specified.",
    101012: "Request information is not valid.",
    101024: "Account is logged in elsewhere.",
    102001: "Free daily searches quota used up.",
    102002: "Daily searches quota used up.",
    102004: "Operation only allowed for subscribers.",
    102005: "Operation only allowed for gold subscribers.",
    102006: "Remaining search quota too low.",
    103001: "Player not found.",
    200039: "Player or player group not found.",
}

_REGIONS = (("NonUS", "Non US"), ("All", "International"))


def user_info(user: User | None, languages: str = "en-us") -> Element:
    """``UserInfo`` as the recorded responses show it (logged in or not)."""
    if user is None:
        info = Element("UserInfo", {"hasFacebook": "false", "hasTwitter": "false", "loggedIn": "false"})
        info.add("Country", text="GB")
        for code, name in reversed(_REGIONS):
            info.add("Regions", {"code": code, "name": name})
        info.add("Currency", text="USD")
        info.add("RemainingSearches", text="0")
        info.add("RequestLanguages", text=languages)
        info.add("Subscriptions", {"freeSearchesRemaining": "0", "totalSearchesRemaining": "0"})
        info.add("AuthorizedNetworks")
        return info
    info = Element(
        "UserInfo",
        {"hasFacebook": "false", "hasTwitter": "false", "loggedIn": "true", "optedInForNewsletter": "false"},
    )
    info.add("Username", text=user.username)
    info.add("Country", text=user.country)
    for code, name in _REGIONS:
        info.add("Regions", {"code": code, "name": name})
    info.add("Currency", text="USD")
    remaining = str(user.remaining)
    info.add("RemainingSearches", text=remaining)
    if user.expiration is not None:
        info.add("ExpirationDate", text=str(user.expiration))
    info.add("RequestLanguages", text=languages)
    subs = info.add(
        "Subscriptions",
        {"freeSearchesRemaining": "0" if user.subscribed else remaining, "totalSearchesRemaining": remaining},
    )
    if user.subscribed:
        subs.add(
            "Subscription",
            {
                "expirationDate": str(user.expiration or 0),
                "primary": "true",
                "accessLevel": "300" if user.level == "gold" else "150",
                "class": "Gold" if user.level == "gold" else "Silver",
            },
        )
    info.add("AuthorizedNetworks", {"all": "true"})
    return info


def error_element(code: int, detail: str | None = None) -> Element:
    text = ERROR_TEXT.get(code, "Error.")
    if detail:
        text = f"{text[:-1]}: {detail}"
    error = Element("ErrorResponse")
    error.add("Error", {"id": str(code)}, text)
    return error


def envelope(
    *,
    success: bool,
    timestamp: int,
    metadata_hash: str | None,
    app_version: str | None = None,
    payload: Element | None = None,
    info: Element | None = None,
) -> Element:
    attrs: dict[str, str] = {}
    if metadata_hash is not None:
        attrs["metadataHash"] = metadata_hash
    attrs["timestamp"] = str(timestamp)
    attrs["success"] = "true" if success else "false"
    if app_version is not None:
        attrs["appVersion"] = app_version
    root = Element("Response", attrs)
    if payload is not None:
        root.children.append(payload)
    if info is not None:
        root.children.append(info)
    return root


def fragment(payload: Element, fmt: str) -> bytes:
    """A payload serialised once for splicing into envelopes: ``"Name":{...}`` (JSON, without
    the outer braces) or ``<Name ...>...</Name>`` (XML, without the declaration)."""
    if fmt == "json":
        return tree.to_json(payload)[1:-1]
    xml = tree.to_xml(payload)
    return xml[xml.index(b"?>") + 2 :].lstrip()


def render(fmt: str, root: Element, payload: bytes | None = None) -> bytes:
    """Serialise ``root`` in ``fmt``, with a pre-serialised ``payload`` fragment spliced in."""
    if fmt == "json":
        body = tree.to_json(root)
        if payload is None:
            return body
        return body[:-2] + b"," + payload + b"}}"
    body = tree.to_xml(root)
    if payload is None:
        return body
    start = body.index(b"<Response")
    end = body.index(b">", start)
    if body[end - 1 : end] == b"/":  # <Response .../> without children
        return body[: end - 1] + b">" + payload + b"</Response>"
    return body[: end + 1] + payload + body[end + 1 :]


# ----------------------------------------------------------------------------------- summary


def _tournament(r: Result) -> Element:
    t = r.tournament
    tp = t.template
    attrs = {
        "duration": str(t.duration),
        "date": str(t.date),
        "currency": tp.currency,
    }
    if t.flags:
        attrs["flags"] = t.flags
    attrs.update(
        {
            "game": tp.game,
            "gameClass": tp.game_class,
            "id": str(t.id),
            "name": tp.name,
            "network": t.network,
            "playersPerTable": str(tp.players_per_table),
            "rake": money(tp.rake),
            "stake": money(tp.stake),
            "state": "Completed",
            "structure": tp.structure,
            "totalEntrants": str(t.entrants),
        }
    )
    if tp.game_class == "scheduled":
        attrs["prizePool"] = money(t.prize_pool)
    if tp.guarantee:
        attrs["guarantee"] = money(tp.guarantee)
    if t.overlay:
        attrs["overlay"] = money(t.overlay)
    if t.re_entries:
        attrs["reEntries"] = str(t.re_entries)
    element = Element("Tournament", attrs)
    entry = {"playerName": r.player, "position": str(r.position)}
    if r.prize:
        entry["prize"] = money(r.prize)
    if r.multientries:
        entry["multientries"] = str(r.multientries)
    element.add("TournamentEntry", entry)
    return element


def summary_payload(
    network: str,
    name: str,
    country: str,
    filter_text: str,
    results: Sequence[Result],
    last_activity: int | None,
    rate_on: RateOn,
    recent: int,
) -> Element:
    """``PlayerResponse`` for a player and the results the filter selected (oldest first)."""
    summary = summarise(results, rate_on, network)
    root = Element("PlayerResponse")
    view = root.add("PlayerView")
    view.add("Filter", text=filter_text or None)
    attrs = {"country": country, "countryName": COUNTRY_NAMES.get(country, country)}
    if last_activity is not None:
        attrs["lastActivity"] = str(last_activity)
    attrs["name"] = name
    attrs["network"] = network
    player = view.add("Player", attrs)
    stats = player.add("Statistics", {"displayCurrency": "USD"})
    children = stats.children
    for sid, value in summary.statistics:
        if value is None:
            children.append(Element("Statistic", {"id": sid, "authorized": "false"}))
        else:
            children.append(Element("Statistic", {"id": sid}, value))
    for set_id, rows in summary.datasets:
        ds = Element("StatisticalDataSet", {"id": set_id})
        for x, ys in rows:
            ds.children.append(Element("Data", {"x": x}, None, [Element("Y", {"id": yid}, value) for yid, value in ys]))
        children.append(ds)
    if summary.events:
        timeline = stats.add("Timeline")
        timeline.children.extend(Element("Event", event) for event in summary.events)
    if results and recent > 0:
        tournaments = player.add("RecentTournaments")
        tournaments.children.extend(_tournament(r) for r in reversed(results[-recent:]))
    return root
