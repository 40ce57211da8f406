"""Schema drift: what the service sends in a player summary that the normaliser does not map.

:data:`MAPPED` lists, element by element, the names (``@attribute``, ``Element``, ``$`` for
text) the normaliser reads into columns. A name outside it is drift: either kept as served in a
map column (a tournament's other attributes in ``tournaments.extra``, an event's in
``player_timeline.attributes``) or in no table at all. Every raw answer keeps it whatever, so
a normaliser that learns it rebuilds the history for free (``tourneylake rebuild``). The
envelope (``UserInfo``, an error) is the client's business and not looked at.

:func:`night_drift` reads a sample of a night's accepted answers (drift is the service's
change, so it shows in most answers; a sample from a few of the night's segments keeps the check
cheap on a large night).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import date
from typing import Any

from tourneylake.api import calls
from tourneylake.api.tree import MalformedPayload, parse
from tourneylake.lake.lake import Lake
from tourneylake.lake.raw import read_raws
from tourneylake.lake.segments import RawRef
from tourneylake.tables.normalize._fast import TOURNAMENT_ATTRS
from tourneylake.tables.normalize.summary import _EVENT_COLUMNS

__all__ = ["MAPPED", "drift_sample", "night_drift", "unmapped"]

log = logging.getLogger(__name__)

#: Segments the sample is read from at most (see :func:`drift_sample`).
SAMPLED_SEGMENTS = 4

_VIEW = "Response/PlayerResponse/PlayerView"
_PLAYER = _VIEW + "/Player"
_STATS = _PLAYER + "/Statistics"
_TOURNAMENT = _PLAYER + "/RecentTournaments/Tournament"
_EVENT = _STATS + "/Timeline/Event"

#: Per element path, the names the normaliser maps into columns.
MAPPED: dict[str, frozenset[str]] = {
    "Response": frozenset({"@success", "@timestamp", "@metadataHash", "PlayerResponse", "UserInfo", "ErrorResponse"}),
    "Response/PlayerResponse": frozenset({"PlayerView"}),
    _VIEW: frozenset({"Filter", "Player"}),
    _VIEW + "/Filter": frozenset({"$"}),
    _PLAYER: frozenset({"@name", "@network", "@country", "@countryName", "@lastActivity", "Statistics", "RecentTournaments"}),
    _STATS: frozenset({"@displayCurrency", "Statistic", "StatisticalDataSet", "Timeline"}),
    _STATS + "/Statistic": frozenset({"@id", "$", "@authorized"}),
    _STATS + "/StatisticalDataSet": frozenset({"@id", "Data"}),
    _STATS + "/StatisticalDataSet/Data": frozenset({"@x", "@z", "Y"}),
    _STATS + "/StatisticalDataSet/Data/Y": frozenset({"@id", "$"}),
    _STATS + "/Timeline": frozenset({"Event"}),
    # the event's columns, and its own copy of the row's network and player
    _EVENT: frozenset({*_EVENT_COLUMNS.values(), "@network", "@player"}),
    _PLAYER + "/RecentTournaments": frozenset({"Tournament"}),
    _TOURNAMENT: frozenset({*("@" + a for a in TOURNAMENT_ATTRS), "TournamentEntry"}),
    _TOURNAMENT + "/TournamentEntry": frozenset({"@playerName", "@position", "@prize", "@multientries"}),
}
#: Elements whose other attributes are kept as served, in a map column.
KEPT_IN = {_TOURNAMENT: "tournaments.extra", _EVENT: "player_timeline.attributes"}
#: The envelope, read by the client: not the normaliser's.
_ENVELOPE = frozenset({"Response/UserInfo", "Response/ErrorResponse"})


def _names(raw: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every (element path, name) pair of the JSON-mapping tree below ``path``."""
    if isinstance(raw, list):
        for item in raw:
            yield from _names(item, path)
        return
    if not isinstance(raw, dict) or path in _ENVELOPE:
        return
    for name, value in raw.items():
        yield path, name
        if name[:1] not in ("@", "$"):
            yield from _names(value, f"{path}/{name}")


def unmapped(raw: dict[str, Any]) -> dict[str, str]:
    """The names of one answer (its ``Response`` element's mapping) the normaliser does not
    map, as ``Element@name`` (or ``Element/Child``), with where they are kept."""
    out: dict[str, str] = {}
    for path, name in _names(raw, "Response"):
        known = MAPPED.get(path)
        if known is None or name in known:
            continue  # below an unknown element: that element is named already
        element = path.rsplit("/", 1)[-1]
        label = f"{element}{name}" if name.startswith("@") else f"{element}/{name}"
        kept = KEPT_IN.get(path) if name.startswith("@") else None
        out[label] = f"kept in {kept}" if kept else "in no table"
    return out


def drift_sample(refs: list[RawRef], sample: int, *, segments: int = SAMPLED_SEGMENTS) -> list[RawRef]:
    """Up to ``sample`` of ``refs``, spread over the night but from at most ``segments`` of its
    segments (first, last and between): a segment on an object store is one GET, and this check
    runs right after the harvest, on the night's critical path."""
    if len(refs) <= sample:
        return refs
    by_location: dict[str, list[RawRef]] = {}
    for ref in refs:
        by_location.setdefault(str(ref.location), []).append(ref)
    locations = list(by_location)
    count = min(segments, len(locations))
    chosen = [locations[round(i * (len(locations) - 1) / max(count - 1, 1))] for i in range(count)]
    pool = [ref for location in dict.fromkeys(chosen) for ref in by_location[location]]
    return pool if len(pool) <= sample else [pool[i * len(pool) // sample] for i in range(sample)]


def night_drift(lake: Lake, night: date, *, sample: int = 50) -> dict[str, str]:
    """What up to ``sample`` of the night's accepted player summaries (spread over the night)
    carry that the normaliser does not map: ``Element@name`` → where it is kept."""
    found: dict[str, str] = {}
    for raw in read_raws(drift_sample(lake.raw.refs(night, calls.PLAYER_SUMMARY), sample)):
        try:
            tree = parse(raw.body, raw.fmt).raw
        except MalformedPayload:  # an unreadable answer is the normaliser's to report, not drift
            continue
        if isinstance(tree, dict):
            found.update(unmapped(tree))
    if found:
        log.warning(
            "night %s: the service sends fields the normaliser does not map (the raw answers keep them): %s",
            night, ", ".join(f"{name} ({kept})" for name, kept in sorted(found.items())),
        )  # fmt: skip
    return dict(sorted(found.items()))
