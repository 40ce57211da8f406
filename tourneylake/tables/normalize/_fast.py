"""The fast path of :class:`~tourneylake.tables.normalize.summary.SummaryNormalizer`: a summary's
skeleton and recent tournaments converted to typed structs in compiled code (``msgspec.convert``
of the tree :func:`tourneylake.api.tree.parse` built, reusing its strings and every rule of its
parse).

The types accept exactly the *clean* shape: every attribute a string (or null), every
repeatable child a list, a bare object or ``""`` (the service's JSON quirks), nothing else. Anything else
(a number where a string is expected, an object where a value is, an attribute with no column, a
stray string where an element is) makes :func:`read` return ``None``, and the normaliser reads
that summary the tree way, so its results, warnings and errors are the tree path's
(``tests/tables/test_normalize_fast.py`` checks both paths agree). Statistics, data sets and
timeline events are left out: the normaliser reads them from the raw dicts on both paths.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import Struct, field

__all__ = ["Entry", "Summary", "Tournament", "read"]

_Empty = Literal[""]  # an empty element
_Str = str | None


class Statistics(Struct, gc=False):
    display_currency: _Str = field(default=None, name="@displayCurrency")
    # Statistic, StatisticalDataSet, Timeline: not converted (see `summary._read_fast`)


class Entry(Struct, gc=False, forbid_unknown_fields=True):
    player_name: _Str = field(default=None, name="@playerName")
    position: _Str = field(default=None, name="@position")
    prize: _Str = field(default=None, name="@prize")
    multientries: _Str = field(default=None, name="@multientries")


# Field names are the attribute names without "@" (the tables' column order is kept by
# `summary._T_COLS`, which finds them by name); an attribute outside this list would go to
# the `extra` map, so it is refused here (forbid_unknown_fields) and read the tree way.
TOURNAMENT_ATTRS = (
    "id",
    "network",
    "name",
    "date",
    "duration",
    "currency",
    "stake",
    "rake",
    "prizePool",
    "guarantee",
    "overlay",
    "reEntries",
    "totalEntrants",
    "playersPerTable",
    "game",
    "gameClass",
    "structure",
    "flags",
    "state",
)

Tournament = msgspec.defstruct(
    "Tournament",
    [(a, _Str, field(default=None, name="@" + a)) for a in TOURNAMENT_ATTRS]
    + [("TournamentEntry", list[Entry] | Entry | _Empty | None, None)],
    gc=False,
    forbid_unknown_fields=True,
)


class Recent(Struct, gc=False):
    Tournament: list[Tournament] | Tournament | _Empty | None = None  # type: ignore[valid-type]


class Player(Struct, gc=False):
    name: _Str = field(default=None, name="@name")
    country: _Str = field(default=None, name="@country")
    country_name: _Str = field(default=None, name="@countryName")
    last_activity: _Str = field(default=None, name="@lastActivity")
    Statistics: list[Statistics] | Statistics | _Empty | None = None
    RecentTournaments: list[Recent] | Recent | _Empty | None = None


class View(Struct, gc=False):
    Filter: _Str = None  # text only; a Filter with attributes is read the tree way
    Player: list[Player] | Player | _Empty | None = None


class PlayerResponse(Struct, gc=False):
    PlayerView: list[View] | View | _Empty | None = None


class Summary(Struct, gc=False):
    """The ``Response`` element of a player summary."""

    success: _Str = field(default=None, name="@success")
    timestamp: _Str = field(default=None, name="@timestamp")
    metadata_hash: _Str = field(default=None, name="@metadataHash")
    PlayerResponse: list[PlayerResponse] | PlayerResponse | _Empty | None = None


_CONVERT_FAILED = (msgspec.ValidationError, RecursionError, TypeError, ValueError)


def read(raw: Any) -> Summary | None:
    """The ``Response`` element's raw mapping as typed structs, or ``None`` when its shape is
    not the clean one (the caller then reads it the tree way)."""
    if type(raw) is not dict:
        return None
    try:
        return msgspec.convert(raw, Summary)
    except _CONVERT_FAILED:
        return None


def first(value: Any) -> Any:
    """The first of a repeatable child (a list, a bare struct, ``""`` or ``None``)."""
    if type(value) is list:
        return value[0] if value else None
    return None if value is None or type(value) is str else value


def items(value: Any) -> list[Any]:
    """A repeatable child as a list (several → list, one → bare struct, none/empty → [])."""
    if type(value) is list:
        return value
    return [] if value is None or type(value) is str else [value]
