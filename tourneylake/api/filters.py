"""The service's filter language: parse, format, check against metadata, and anchor to a night.

Every search is paid for, so a filter the service would reject must be caught here, before it
costs anything; and one it accepts must never be refused here, or it can never be harvested. The
rule where the documentation is silent: refuse what it rules out or what cannot be read at all,
accept what it is silent on. :func:`parse_filter` reads the syntax (``Name[!]:value,...;...``, a
trailing ``;`` dropped); :class:`FilterCatalog` checks each value by its constraint's type in
the metadata (digits are ASCII digits, a typed value is ASCII); :func:`filter_for_night` gives
the filter to send for a night, its Dates anchored to the night's last second, so a night means
the same whenever it is fetched. Values are kept exactly as written: ``format_filter`` round
trips, and the canonical form is what is sent and keyed. Every rule, form and decision is in
``docs/reference/filters.md``.
"""

from __future__ import annotations

import calendar
import difflib
import re
import zoneinfo
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Literal, TypeVar

from tourneylake.api.tree import Node
from tourneylake.errors import TourneylakeError

__all__ = [
    "DATA_START",
    "DURATION_UNIT_SECONDS",
    "FIRST_NIGHT",
    "Constraint",
    "ConstraintDefinition",
    "DateSpec",
    "Filter",
    "FilterCatalog",
    "FilterProblem",
    "FilterSyntaxError",
    "NightFilter",
    "NightFilterError",
    "Range",
    "Window",
    "canonical_filter",
    "filter_for_night",
    "format_filter",
    "parse_date",
    "parse_duration",
    "parse_filter",
    "parse_range",
]

_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
# Digits are ASCII digits ([0-9]): Python's \d and str.isdigit also match other scripts' digits
# (Arabic-Indic, Devanagari, fullwidth...), which the service refuses (and Decimal would read).
_BOUND_RE = re.compile(r"(?P<currency>[A-Z]{3})?(?:(?P<number>[+-]?[0-9]+(?:\.[0-9]+)?)|(?P<open>\*))")
_DURATION_BOUND_RE = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]+)?)(?P<unit>[smh]?)")
_RELATIVE_RE = re.compile(r"(?P<amount>-?[0-9]+)(?P<unit>[YMWDHS])")
_DIGITS_RE = re.compile(r"[0-9]+")
_ASCII_DIGITS = frozenset("0123456789")
_ZONE_SHAPE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9_+-]+)*")

#: Seconds per relative-date unit. The service does not say how long its "month" and "year" are;
#: we use 30 and 365 days. That is exact enough for what :meth:`DateSpec.bounds` is used for
#: (checking which tournaments a filter can select), and it never depends on the calendar.
UNIT_SECONDS: Mapping[str, int] = {
    "Y": 365 * 86_400,
    "M": 30 * 86_400,
    "W": 7 * 86_400,
    "D": 86_400,
    "H": 3_600,
    "S": 1,
}

#: Seconds per unit of a ``Duration`` bound; a bound without a unit is in minutes (the manual).
DURATION_UNIT_SECONDS: Mapping[str, int] = {"s": 1, "m": 60, "h": 3_600}

#: The first year a ``Date:<year>`` may name (the documentation: "a year after 2006").
FIRST_YEAR = 2007

#: What opens a time-zone prefix, ``TZ,<IANA zone>,...``, and the constraints documented with one.
TIME_ZONE_MARK = "TZ"
_ZONED = frozenset({"DayOfWeek", "HourOfDay"})

#: Constraints the manual says can never be inverted (``Saved!:MyFilter`` is refused).
_NEVER_INVERTED = frozenset({"Saved"})

#: The suffix of a cash range meaning "average buy-in including rebuys".
REBUYS_SUFFIX = "R"

#: A ``Position`` value meaning "at the final table".
FINAL_TABLE = "FT"


# ----------------------------------------------------------------------------------- errors


class FilterSyntaxError(TourneylakeError, ValueError):
    """A filter (or one of its values) that is not well formed.

    ``position`` is the 0-based index into ``text`` where the problem is; ``reason`` says what is
    wrong; ``constraint`` names the constraint it happened in, when that is known.
    """

    def __init__(self, reason: str, position: int, text: str, constraint: str | None = None) -> None:
        self.reason = reason
        self.position = position
        self.text = text
        self.constraint = constraint
        super().__init__(f"{reason} at position {position} of {text!r}")


@dataclass(frozen=True)
class FilterProblem:
    """One reason metadata rejects a filter: which constraint, where in the text, and why."""

    constraint: str
    position: int
    message: str

    def __str__(self) -> str:
        where = f" (constraint {self.constraint!r})" if self.constraint else ""
        return f"{self.message} at position {self.position}{where}"


# ----------------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Constraint:
    """One ``Name:values`` (or ``Name!:values``) part of a filter; values are raw strings."""

    name: str
    negated: bool
    values: tuple[str, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.values, tuple):  # a list would make the dataclass unhashable
            object.__setattr__(self, "values", tuple(self.values))

    def __str__(self) -> str:
        return f"{self.name}{'!' if self.negated else ''}:{','.join(self.values)}"


@dataclass(frozen=True)
class Filter:
    """A parsed filter: its constraints in the order written. ``str(f)`` is the filter string;
    the empty filter (unfiltered) is falsy."""

    constraints: tuple[Constraint, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.constraints, tuple):
            object.__setattr__(self, "constraints", tuple(self.constraints))

    def __str__(self) -> str:
        return format_filter(self)

    def __iter__(self) -> Iterator[Constraint]:
        return iter(self.constraints)

    def __len__(self) -> int:
        return len(self.constraints)

    def get(self, name: str) -> list[Constraint]:
        """Every constraint called ``name`` (a name may appear more than once, e.g. negated)."""
        return [c for c in self.constraints if c.name == name]


@dataclass(frozen=True)
class Range:
    """A numeric range value: ``None`` for an open end (``*``); the currency of its bounds, if any;
    ``rebuys`` when it ends in ``R`` (a cash range of average buy-ins including rebuys)."""

    low: Decimal | None
    high: Decimal | None
    currency: str | None
    rebuys: bool = False

    def __contains__(self, amount: Decimal | int | float) -> bool:
        value = Decimal(str(amount))
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


@dataclass(frozen=True)
class DateSpec:
    """A ``Date`` value.

    - ``relative``: ``amount`` units back from now (``unit`` one of Y M W D H S); a negative
      amount means the next ``-amount`` units (active tournaments only).
    - ``year``: one calendar year, UTC.
    - ``range``: ``start``..``end`` in epoch seconds, both inclusive.
    """

    kind: Literal["relative", "year", "range"]
    amount: int | None = None
    unit: str | None = None
    year: int | None = None
    start: int | None = None
    end: int | None = None

    def bounds(self, now: int) -> tuple[int, int]:
        """The inclusive ``(start, end)`` epoch-second interval this spec selects at ``now``.

        A month is 30 days and a year 365 days (:data:`UNIT_SECONDS`); the service does not
        document its own lengths. The year form is the whole calendar year in UTC.
        """
        if self.kind == "relative":
            assert self.amount is not None and self.unit is not None
            span = abs(self.amount) * UNIT_SECONDS[self.unit]
            return (now - span, now) if self.amount > 0 else (now, now + span)
        if self.kind == "year":
            assert self.year is not None
            # 31 December 23:59:59, not next New Year minus one: that is year 10000 for 9999
            return calendar.timegm((self.year, 1, 1, 0, 0, 0)), calendar.timegm((self.year, 12, 31, 23, 59, 59))
        assert self.start is not None and self.end is not None
        return self.start, self.end

    def __str__(self) -> str:
        if self.kind == "relative":
            return f"{self.amount}{self.unit}"
        if self.kind == "year":
            return str(self.year)
        return f"{self.start}~{self.end}"


# ----------------------------------------------------------------------------------- syntax


@dataclass(frozen=True)
class _Span:
    """Where a constraint and each of its values start in the filter text."""

    constraint: Constraint
    position: int
    value_positions: tuple[int, ...]


def _describe(ch: str) -> str:
    return "' ' (a space)" if ch == " " else repr(ch)


def _parse_spans(text: str) -> list[_Span]:
    if not isinstance(text, str):
        raise TypeError(f"a filter is a string, not {type(text).__name__}")
    spans: list[_Span] = []
    if text == "":
        return spans
    size = len(text)
    pos = 0
    while True:
        start = pos
        match = _NAME_RE.match(text, pos)
        if match is None:
            if text[pos] == ";":
                where = "before the first ';'" if pos == 0 else "(two ';' in a row)"
                raise FilterSyntaxError(f"empty constraint {where}", pos, text)
            if pos == 0 and text[pos] == ":":
                raise FilterSyntaxError("missing constraint name before ':'", pos, text)
            raise FilterSyntaxError(
                f"unexpected {_describe(text[pos])}: a constraint name must start with a letter",
                pos,
                text,
            )
        name = match.group()
        pos = match.end()
        negated = False
        if pos < size and text[pos] == "!":
            negated = True
            pos += 1
        if pos == size:
            raise FilterSyntaxError(f"constraint {name!r} has no ':' and no value (expected '{name}:<value>')", pos, text, name)
        if text[pos] != ":":
            expected = "':'" if negated else "':' (or '!:' to invert)"
            raise FilterSyntaxError(
                f"unexpected {_describe(text[pos])} after constraint name {name!r}: expected {expected}",
                pos,
                text,
                name,
            )
        pos += 1
        values: list[str] = []
        positions: list[int] = []
        while True:
            end = pos
            while end < size and text[end] not in ",;":
                end += 1
            value = text[pos:end]
            if value == "":
                if not values:
                    reason = f"constraint {name!r} has no value after ':'"
                else:
                    reason = f"empty value in constraint {name!r} (nothing after ',')"
                raise FilterSyntaxError(reason, pos, text, name)
            control = _CONTROL_RE.search(value)
            if control is not None:
                raise FilterSyntaxError(
                    f"control character {control.group()!r} in a value of constraint {name!r}",
                    pos + control.start(),
                    text,
                    name,
                )
            values.append(value)
            positions.append(pos)
            pos = end
            if pos < size and text[pos] == ",":
                pos += 1
                continue
            break
        spans.append(_Span(Constraint(name, negated, tuple(values)), start, tuple(positions)))
        if pos == size:
            return spans
        pos += 1  # the ';'
        if pos == size:
            # A trailing ';' (an empty last constraint): live clients send one; it selects nothing
            # more or less, so it is absent rather than an error, and formatting drops it.
            return spans


def parse_filter(text: str) -> Filter:
    """Parse a filter string; ``""`` is the empty (unfiltered) filter. A trailing ``;`` is
    accepted and dropped (see the module docstring).

    Raises :class:`FilterSyntaxError` (a ``ValueError``) with the position and a message saying
    what is wrong, e.g. ``empty value in constraint 'Type' (nothing after ',') at position 7``.
    """
    return Filter(tuple(span.constraint for span in _parse_spans(text)))


def format_filter(f: Filter) -> str:
    """Write a filter back as a string: the inverse of :func:`parse_filter` (which drops a
    trailing ``;``, so this never writes one).

    Raises :class:`ValueError` for a constraint built by hand that could not be read back
    (a bad name, no values, an empty value, or one containing ``,`` ``;`` or a control
    character): writing it would silently produce a different filter.
    """
    parts: list[str] = []
    for constraint in f.constraints:
        if not _NAME_RE.fullmatch(constraint.name):
            raise ValueError(f"cannot write constraint name {constraint.name!r}: expected [A-Za-z][A-Za-z0-9_]*")
        if not constraint.values:
            raise ValueError(f"cannot write constraint {constraint.name!r} without values")
        for value in constraint.values:
            if value == "" or "," in value or ";" in value or _CONTROL_RE.search(value):
                raise ValueError(
                    f"cannot write value {value!r} of constraint {constraint.name!r}: "
                    "values must be non-empty and contain no ',', ';' or control characters"
                )
        parts.append(str(constraint))
    return ";".join(parts)


def canonical_filter(text: str) -> str:
    """The form of ``text`` that is sent and keyed: ``format_filter(parse_filter(text))``, which is
    ``text`` itself, less a trailing ``;``. Raises :class:`FilterSyntaxError` like :func:`parse_filter`."""
    return format_filter(parse_filter(text))


# ----------------------------------------------------------------------------------- values


def _split_range(value: str) -> list[tuple[str, int, str]]:
    """The bounds of a range value as ``(text, offset, which)``: one ``single``, or ``low`` and
    ``high`` around the ``~``."""
    if value == "":
        raise FilterSyntaxError("empty range", 0, value)
    tilde = value.find("~")
    if tilde < 0:
        return [(value, 0, "single")]
    second = value.find("~", tilde + 1)
    if second >= 0:
        raise FilterSyntaxError("more than one '~' in a range", second, value)
    return [(value[:tilde], 0, "low"), (value[tilde + 1 :], tilde + 1, "high")]


def _check_order(low: Decimal | None, high: Decimal | None, value: str, shown: tuple[str, str] | None = None) -> None:
    if low is not None and high is not None and low > high:
        low_text, high_text = shown or (str(low), str(high))
        raise FilterSyntaxError(f"low bound {low_text} is above high bound {high_text}", 0, value)


def _parse_bound(text: str, offset: int, value: str, which: str) -> tuple[Decimal | None, str | None]:
    if text == "":
        raise FilterSyntaxError(f"empty {which} bound (write '*' for an open end)", offset, value)
    match = _BOUND_RE.fullmatch(text)
    if match is None:
        raise FilterSyntaxError(
            f"malformed {which} bound {text!r}: expected a number with an optional upper-case "
            "currency prefix (45, 1.50, USD2) or '*' for an open end (GBP*)",
            offset,
            value,
        )
    number = None if match.group("open") else Decimal(match.group("number"))
    return number, match.group("currency")


def parse_range(value: str) -> Range:
    """Read a range value: ``low~high`` (``*`` = open end) or a single value meaning ``low == high``,
    optionally ending in ``R`` (average buy-in including rebuys).

    A currency prefix may sit on either bound or both (they must agree), an open one included:
    ``USD2~*``, ``*~EUR10``, ``USD1~USD5``, ``USD1.50``, ``GBP*~5R``. Whether a constraint takes a
    currency or ``R`` is :class:`FilterCatalog`'s business. Raises :class:`FilterSyntaxError` with
    the position inside ``value``.
    """
    # R is the suffix only right after a number or '*', so a malformed '5~EUR' is not read as '5~EU' + R
    rebuys = len(value) > 1 and value.endswith(REBUYS_SUFFIX) and (value[-2] in _ASCII_DIGITS or value[-2] == "*")
    body = value[:-1] if rebuys else value
    parts = _split_range(body)
    if body != value and len(body) == 0:
        raise FilterSyntaxError(f"nothing before {REBUYS_SUFFIX!r}", 0, value)
    read = [(*_parse_bound(text, offset, value, which), offset) for text, offset, which in parts]
    if len(read) == 1:
        number, currency, _ = read[0]
        return Range(number, number, currency, rebuys)
    (low, low_currency, _), (high, high_currency, high_offset) = read
    if low_currency and high_currency and low_currency != high_currency:
        raise FilterSyntaxError(
            f"currency {high_currency} of the high bound disagrees with {low_currency} of the low bound",
            high_offset,
            value,
        )
    _check_order(low, high, value)
    return Range(low, high, low_currency or high_currency, rebuys)


def parse_duration(value: str) -> Range:
    """Read a ``Duration`` value into a :class:`Range` of **seconds**: a single value or
    ``low~high`` (``*`` = open end), each bound a number with an optional unit ``s``, ``m`` or ``h``
    and none meaning minutes: ``30s~50m`` is 30..3000 seconds, ``1h~*`` an hour or more, ``45``
    45 minutes. Raises :class:`FilterSyntaxError` with the position inside ``value``."""
    bounds: list[Decimal | None] = []
    for text, offset, which in _split_range(value):
        if text == "*":
            bounds.append(None)
            continue
        if text == "":
            raise FilterSyntaxError(f"empty {which} bound (write '*' for an open end)", offset, value)
        match = _DURATION_BOUND_RE.fullmatch(text)
        if match is None:
            raise FilterSyntaxError(
                f"malformed {which} duration {text!r}: expected a number of minutes, or of seconds, "
                "minutes or hours with the unit s, m or h (90, 30s, 50m, 1.5h), or '*'",
                offset,
                value,
            )
        bounds.append(Decimal(match.group("number")) * DURATION_UNIT_SECONDS[match.group("unit") or "m"])
    if len(bounds) == 1:
        return Range(bounds[0], bounds[0], None)
    low, high = bounds
    tilde = value.find("~")
    _check_order(low, high, value, (value[:tilde], value[tilde + 1 :]))
    return Range(low, high, None)


def parse_date(value: str) -> DateSpec:
    """Read a ``Date`` value: ``nY|nM|nW|nD|nH|nS`` (n may be negative, not zero), a year after
    2006, or ``start~end`` epoch seconds. Raises :class:`FilterSyntaxError`."""
    match = _RELATIVE_RE.fullmatch(value)
    if match is not None:
        amount = int(match.group("amount"))
        if amount == 0:
            raise FilterSyntaxError("a relative date of zero units selects nothing", 0, value)
        return DateSpec("relative", amount=amount, unit=match.group("unit"))
    if _DIGITS_RE.fullmatch(value):
        year = int(value)
        if len(value) != 4 or year < FIRST_YEAR:
            raise FilterSyntaxError(
                f"a bare number must be a year after {FIRST_YEAR - 1} (for epoch seconds write 'start~end')",
                0,
                value,
            )
        return DateSpec("year", year=year)
    tilde = value.find("~")
    if tilde >= 0:
        start_text, end_text = value[:tilde], value[tilde + 1 :]
        if not _DIGITS_RE.fullmatch(start_text):
            raise FilterSyntaxError(f"date range start {start_text!r} is not epoch seconds", 0, value)
        if not _DIGITS_RE.fullmatch(end_text):
            raise FilterSyntaxError(f"date range end {end_text!r} is not epoch seconds", tilde + 1, value)
        start, end = int(start_text), int(end_text)
        if start > end:
            raise FilterSyntaxError(f"date range starts ({start}) after it ends ({end})", 0, value)
        return DateSpec("range", start=start, end=end)
    raise FilterSyntaxError(
        "malformed date: expected nY, nM, nW, nD, nH or nS (e.g. 30D, -2D), "
        f"a year after {FIRST_YEAR - 1} (e.g. 2019), or start~end in epoch seconds",
        0,
        value,
    )


@lru_cache(maxsize=1)
def _time_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def _is_time_zone(name: str) -> bool:
    """Whether ``name`` is an IANA time zone. Without a time-zone database on this machine we
    cannot tell, and a valid zone must never be refused: then only its shape is checked."""
    zones = _time_zones()
    return name in zones if zones else _ZONE_SHAPE_RE.fullmatch(name) is not None


# ----------------------------------------------------------------------------------- metadata


@dataclass(frozen=True)
class ConstraintDefinition:
    """A constraint as metadata publishes it: ``@id``, ``@type`` and its option ids (if any)."""

    id: str
    type: str
    options: tuple[str, ...] = ()

    @property
    def kinds(self) -> tuple[str, ...]:
        """The parts of a composite type: ``"Context,Range"`` → ``("Context", "Range")``."""
        return tuple(part.strip() for part in self.type.split(",") if part.strip())


#: Types whose values are plain numbers or ranges of them (no currency, no ``R``).
_NUMBER_TYPES = frozenset({"Number", "Percentage", "Integer"})

#: Types whose values have a form of their own, so a stray ``TZ`` among them is a misplaced time
#: zone; in a Text, a player list or a saved filter's name it is just a value.
_TYPED_VALUES = frozenset({"Multiselect", "Date", "Range", "CashRange", *_NUMBER_TYPES})

#: An example of the first value of each composite ``<Kind>,Range`` type, for messages.
_COMPOSITE_EXAMPLES: Mapping[str, str] = {"Context": "Last,1~8", "PlayerClass": "Fish,3~4", "Statistic": "AvROI,10~*"}

#: Constraints of later editions of the service (the manual, 2025) that older metadata lacks.
_LATER_EDITIONS = frozenset({"EndDate", "HourOfDay", "Position"})

_Values = list[tuple[str, int]]  # each value with its position in the filter text
_Read = TypeVar("_Read")


def _suggest(word: str, candidates: list[str] | tuple[str, ...] | frozenset[str]) -> str:
    ordered = sorted(candidates)
    folded = {c.casefold(): c for c in ordered}
    if word.casefold() in folded:
        return f" (did you mean {folded[word.casefold()]!r}?)"
    close = difflib.get_close_matches(word, ordered, n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _has_duration_unit(value: str) -> bool:
    """A value that would be a well-formed Duration with a unit (``5m``, ``1h~*``)."""
    try:
        parse_duration(value)
    except FilterSyntaxError:
        return False
    return any(ch in DURATION_UNIT_SECONDS for ch in value)


def _not_ascii(name: str, values: _Values, found: list[FilterProblem]) -> bool:
    """Whether a value holds a character that is not ASCII (each such value is a problem added to
    ``found``). Numbers, options, currencies, dates, contexts and time zones are ASCII at the
    service (a digit of another script is no digit to it); only free text, a tournament's or a
    player's name, may be written in any script."""
    before = len(found)
    for value, position in values:
        offset = next((i for i, ch in enumerate(value) if not ch.isascii()), None)
        if offset is not None:
            ch = value[offset]
            found.append(FilterProblem(name, position + offset, f"{name}: {ch!r} (U+{ord(ch):04X}) in {value!r} is not ASCII"))
    return len(found) > before


def _is_range_like(value: str) -> bool:
    """A value that reads as a range or a bare number (where a name was expected)."""
    return "~" in value or value == "*" or _BOUND_RE.fullmatch(value) is not None


@dataclass(frozen=True)
class FilterCatalog:
    """What metadata says a filter may contain; checks filters before they cost a search.

    Checked, by the type metadata declares for each constraint (the module docstring has the
    forms): the constraint exists; Multiselect values are its option ids (a Multiselect without
    options in metadata takes any); a time zone opens only ``DayOfWeek`` and ``HourOfDay`` and is
    an IANA zone; a Date has exactly one well-formed value; ranges are well formed, low bound not
    above high, with a currency (one that metadata lists, unless it lists none) and ``R`` only on
    CashRange, units only on ``Duration``, whole hours 0–23 on ``HourOfDay``, positions from 1 (or
    ``FT``) on ``Position`` and on a ``Context,Range``; a composite ``<Kind>,Range`` starts with its
    name and has at most one range; ``Saved`` is never inverted. Text, PlayerList, Flag, Special
    and types we do not know take any value.
    """

    constraints: Mapping[str, ConstraintDefinition]
    currencies: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_metadata(cls, metadata_response: Node) -> FilterCatalog:
        """Build from a ``/metadata`` response: the ``Response`` root or its ``MetadataResponse``."""
        root: Node | None = metadata_response
        if metadata_response.name == "Response":
            root = metadata_response.one("MetadataResponse")
        if root is None or root.name != "MetadataResponse":
            raise ValueError(f"expected a metadata response (Response/MetadataResponse), got {metadata_response.name!r}")
        definitions: dict[str, ConstraintDefinition] = {}
        container = root.one("FilterDefinition")
        for node in container.all("ConstraintDefinition") if container is not None else []:
            constraint_id = node.attr("id")
            if not constraint_id:
                continue
            options = tuple(o.attr("id") or "" for o in node.all("Option") if o.attr("id"))
            definitions[constraint_id] = ConstraintDefinition(constraint_id, node.attr("type") or "", options)
        currencies_node = root.one("Currencies")
        currencies = frozenset(
            iso for c in (currencies_node.all("Currency") if currencies_node is not None else []) if (iso := c.attr("iso"))
        )
        return cls(definitions, currencies)

    def problems(self, f: Filter | str) -> list[FilterProblem]:
        """Every reason the service would reject ``f``; empty when it is fine.

        Positions index into the filter string (for a :class:`Filter`, into ``format_filter(f)``).
        A syntax error is reported as the one problem.
        """
        try:
            text = f if isinstance(f, str) else format_filter(f)
            spans = _parse_spans(text)
        except FilterSyntaxError as exc:
            return [FilterProblem(exc.constraint or "", exc.position, exc.reason)]
        except ValueError as exc:  # a hand-built Filter that cannot be written
            return [FilterProblem("", 0, str(exc))]
        found: list[FilterProblem] = []
        for span in spans:
            found.extend(self._constraint_problems(span))
        return found

    # -------------------------------------------------------------------------- internals

    def _constraint_problems(self, span: _Span) -> list[FilterProblem]:
        constraint = span.constraint
        name = constraint.name
        definition = self.constraints.get(name)
        if definition is None:
            hint = _suggest(name, tuple(self.constraints))
            if not hint and name in _LATER_EDITIONS:
                hint = " (a constraint of later editions of the service, which this metadata does not publish)"
            return [FilterProblem(name, span.position, f"unknown constraint {name!r}{hint}")]
        found: list[FilterProblem] = []
        if constraint.negated and name in _NEVER_INVERTED:
            bang = span.position + len(name)
            found.append(FilterProblem(name, bang, f"{name} cannot be inverted: remove the '!' after {name}"))
        values: _Values = list(zip(constraint.values, span.value_positions, strict=True))
        kinds = definition.kinds
        typed = definition.type in _TYPED_VALUES or (len(kinds) == 2 and kinds[1] == "Range")
        if typed and _not_ascii(name, values, found):
            return found  # its typed reading would only say the same again, less clearly
        # a Text, a player or an option may well be "TZ": a time zone is looked for only where it cannot
        if name in _ZONED or (definition.type in _TYPED_VALUES and TIME_ZONE_MARK not in definition.options):
            values = self._time_zone_prefix(name, values, found)
        if definition.type == "Multiselect":
            if definition.options:
                for value, position in values:
                    if value not in definition.options:
                        hint = _suggest(value, definition.options)
                        found.append(FilterProblem(name, position, f"{value!r} is not an option of {name}{hint}"))
        elif definition.type == "Date":
            if len(values) > 1:
                found.append(FilterProblem(name, values[1][1], f"{name} takes exactly one value"))
            for value, position in values:
                self._read(name, value, position, parse_date, found)
        elif definition.type == "Range":
            for value, position in values:
                found.extend(self._plain_range_problems(name, value, position))
        elif definition.type == "CashRange":
            for value, position in values:
                found.extend(self._cash_problems(name, value, position))
        elif definition.type in _NUMBER_TYPES:
            for value, position in values:
                found.extend(self._number_problems(name, value, position, whole=definition.type == "Integer"))
        elif len(kinds) == 2 and kinds[1] == "Range":
            found.extend(self._composite_problems(name, kinds[0], values))
        return found

    @staticmethod
    def _read(name: str, value: str, position: int, reader: Callable[[str], _Read], found: list[FilterProblem]) -> _Read | None:
        """``reader(value)``, or ``None`` with the problem (its position in the filter) added."""
        try:
            return reader(value)
        except FilterSyntaxError as exc:
            found.append(FilterProblem(name, position + exc.position, f"{name}: {exc.reason}"))
            return None

    @staticmethod
    def _time_zone_prefix(name: str, values: _Values, found: list[FilterProblem]) -> _Values:
        """The values after a leading ``TZ,<zone>`` (checked); a ``TZ`` anywhere else is a problem."""
        for index, (value, position) in enumerate(values):
            if value != TIME_ZONE_MARK or (index == 0 and name in _ZONED):
                continue
            if name not in _ZONED:
                zoned = " and ".join(sorted(_ZONED))
                found.append(FilterProblem(name, position, f"{name} takes no time zone (only {zoned} do)"))
            else:
                found.append(FilterProblem(name, position, f"{name}: the time zone (TZ,<zone>) must come first"))
            return values[:index] + values[index + 2 :]
        if name not in _ZONED or not values or values[0][0] != TIME_ZONE_MARK:
            return values
        if len(values) < 2:
            position = values[0][1] + len(TIME_ZONE_MARK)
            found.append(FilterProblem(name, position, f"{name}: TZ needs a time zone after it (TZ,Europe/London,...)"))
            return []
        zone, zone_position = values[1]
        if not _is_time_zone(zone):
            hint = _suggest(zone, _time_zones()) or " (an IANA name such as Europe/London)"
            found.append(FilterProblem(name, zone_position, f"{name}: unknown time zone {zone!r}{hint}"))
        if len(values) == 2:
            found.append(FilterProblem(name, zone_position + len(zone), f"{name} has no value after its time zone"))
        return values[2:]

    def _plain_range_problems(self, name: str, value: str, position: int) -> list[FilterProblem]:
        found: list[FilterProblem] = []
        if name == "Duration":
            self._read(name, value, position, parse_duration, found)
            return found
        if name == "Position" and FINAL_TABLE in value:
            if value != FINAL_TABLE:
                found.append(
                    FilterProblem(
                        name, position, f"{name}: {FINAL_TABLE} is a value of its own ({name}:{FINAL_TABLE}), not a bound"
                    )
                )
            return found
        parsed = self._read(name, value, position, parse_range, found)
        if parsed is None:
            if _has_duration_unit(value):  # say what is really wrong, not "malformed bound"
                found[-1] = FilterProblem(name, position, f"{name}: only Duration takes a unit (s, m, h): {value!r}")
            return found
        found.extend(self._no_money(name, value, position, parsed))
        if name == "HourOfDay":
            found.extend(self._whole_within(name, value, position, parsed, 0, 23, "an hour of the day"))
        elif name == "Position":
            found.extend(self._whole_within(name, value, position, parsed, 1, None, f"a position (from 1) or {FINAL_TABLE}"))
        return found

    def _number_problems(self, name: str, value: str, position: int, *, whole: bool) -> list[FilterProblem]:
        found: list[FilterProblem] = []
        parsed = self._read(name, value, position, parse_range, found)
        if parsed is not None:
            found.extend(self._no_money(name, value, position, parsed))
            if whole:
                found.extend(self._whole_within(name, value, position, parsed, None, None, "a whole number"))
        return found

    def _cash_problems(self, name: str, value: str, position: int) -> list[FilterProblem]:
        found: list[FilterProblem] = []
        parsed = self._read(name, value, position, parse_range, found)
        if parsed is not None and parsed.currency is not None and self.currencies and parsed.currency not in self.currencies:
            hint = _suggest(parsed.currency, self.currencies)
            found.append(
                FilterProblem(
                    name, position + value.find(parsed.currency), f"currency {parsed.currency} is not one metadata lists{hint}"
                )
            )
        return found

    def _composite_problems(self, name: str, kind: str, values: _Values) -> list[FilterProblem]:
        """``<Kind>,Range``: a name (a context, a player class, a statistic), then one range."""
        found: list[FilterProblem] = []
        first, first_position = values[0]
        example = _COMPOSITE_EXAMPLES.get(kind, f"{kind},1~8")
        if _is_range_like(first):
            found.append(
                FilterProblem(name, first_position, f"{name}: first the {kind.lower()} (e.g. {name}:{example}), then the range")
            )
            return found
        if len(values) > 2:
            found.append(FilterProblem(name, values[2][1], f"{name} takes a {kind.lower()} and one range"))
        if len(values) < 2:
            if kind == "Context":
                end = first_position + len(first)
                found.append(
                    FilterProblem(name, end, f"{name}: a range of positions must follow the context ({name}:{first},1~8)")
                )
            return found
        value, position = values[1]
        parsed = self._read(name, value, position, parse_range, found)
        if parsed is not None:
            found.extend(self._no_money(name, value, position, parsed))
            if kind == "Context":
                found.extend(self._whole_within(name, value, position, parsed, 1, None, "a position counted from 1"))
        return found

    @staticmethod
    def _no_money(name: str, value: str, position: int, parsed: Range) -> list[FilterProblem]:
        found: list[FilterProblem] = []
        if parsed.currency is not None:
            found.append(
                FilterProblem(
                    name,
                    position + value.find(parsed.currency),
                    f"{name} is not an amount of money: remove the currency {parsed.currency}",
                )
            )
        if parsed.rebuys:
            found.append(
                FilterProblem(
                    name,
                    position + len(value) - 1,
                    f"{name}: {REBUYS_SUFFIX!r} (average buy-in including rebuys) only ends a cash range",
                )
            )
        return found

    @staticmethod
    def _whole_within(
        name: str, value: str, position: int, parsed: Range, lowest: int | None, highest: int | None, what: str
    ) -> list[FilterProblem]:
        tilde = value.find("~")
        for bound, offset in ((parsed.low, 0), (parsed.high, tilde + 1 if tilde >= 0 else 0)):
            if bound is None:
                continue
            whole = bound == bound.to_integral_value()
            if not whole or (lowest is not None and bound < lowest) or (highest is not None and bound > highest):
                span = f" ({lowest}–{highest})" if lowest is not None and highest is not None else ""
                return [FilterProblem(name, position + offset, f"{name}: {bound} is not {what}{span}")]
        return []


# ----------------------------------------------------------------------------------- nights

#: 2007-01-01T00:00:00Z: the service's data starts after 2006 (a year filter must be after it).
DATA_START = calendar.timegm((FIRST_YEAR, 1, 1, 0, 0, 0))

#: The first night there is anything to harvest for: the first UTC day of the service's data.
FIRST_NIGHT = date(FIRST_YEAR, 1, 1)

#: How a night selects tournaments: ``as_of`` (started up to the end of the night) or ``day``
#: (started during the night's own UTC day).
Window = Literal["as_of", "day"]

_DATE = "Date"
_DAY_SECONDS = 86_400
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


class NightFilterError(TourneylakeError, ValueError):
    """:func:`filter_for_night` was asked for something that cannot be: ``window="day"`` with
    ``anchor=False`` (a per-day window anchors the filter), an unknown window, or a night before
    :data:`FIRST_NIGHT`."""


@dataclass(frozen=True)
class NightFilter:
    """The filter to send for one night (see :func:`filter_for_night`).

    - ``written``: the filter as written (the input, unchanged).
    - ``sent``: the filter to send for the night; ``format_filter(parse_filter(sent)) == sent``.
    - ``anchored``: nothing the result selects can move with the day it is fetched on (every
      Date is an absolute range ending no later than the night's last second, and no Date is
      inverted, upcoming or sent as written).
    - ``selects_nothing``: a Date selects nothing up to the end of the night (a year or a range
      that starts after it): spend no search. ``sent`` then carries that Date clipped to the
      night, an empty range (start > end) that :func:`parse_date` and so the catalog reject: it
      cannot pass the check before a search as a filter that selects tournaments.
    - ``notes``: what was changed and what could not be anchored, and why, in the order of the
      constraints (for logs and the night's summary).
    """

    written: str
    sent: str
    anchored: bool
    selects_nothing: bool = False
    notes: tuple[str, ...] = ()


def _midnight(day: date) -> int:
    """Epoch seconds of ``day`` at 00:00:00Z (by day ordinal: no time tuple, no time zone)."""
    return (day.toordinal() - _EPOCH_ORDINAL) * _DAY_SECONDS


def _day_after(night: date) -> tuple[int, int, int]:
    """``(year, month, day)`` of the day after ``night``; a tuple, as 9999-12-31 has no
    :class:`date` after it."""
    if (night.month, night.day) == (12, 31):
        return night.year + 1, 1, 1
    after = night + timedelta(days=1)
    return after.year, after.month, after.day


def _months_back(year: int, month: int, day: int, months: int) -> int:
    """Epoch seconds of 00:00:00Z on the day ``months`` calendar months before ``year-month-day``:
    the same day of the month, clamped to the last day of the month landed in when that month is
    shorter (31 March, one month back: 28 February, 29 in a leap year). 0 (1970-01-01, where epoch
    seconds begin) for a day before 1970."""
    index = year * 12 + (month - 1) - months
    if index < 1970 * 12:
        return 0
    to_year, to_month = divmod(index, 12)
    to_month += 1
    return _midnight(date(to_year, to_month, min(day, calendar.monthrange(to_year, to_month)[1])))


def _clipped(spec: DateSpec, night: date, night_end: int) -> tuple[int, int]:
    """The inclusive ``(start, end)`` of a positive Date (not an upcoming one) as of the night
    whose last second is ``night_end``; ``start > end`` when it selects nothing up to then."""
    if spec.kind == "relative":
        assert spec.amount is not None and spec.amount > 0 and spec.unit is not None
        if spec.unit in ("M", "Y"):
            months = spec.amount * (12 if spec.unit == "Y" else 1)
            return _months_back(*_day_after(night), months), night_end
        return max(0, night_end + 1 - spec.amount * UNIT_SECONDS[spec.unit]), night_end
    start, end = spec.bounds(night_end)
    return start, min(end, night_end)


def _read_dates(expression: str) -> list[tuple[Constraint, DateSpec | None]]:
    """Parse ``expression``: each constraint with the reading of its value if it is a Date
    (``None`` for the others). A Date with more than one value, or a malformed one, raises
    :class:`FilterSyntaxError` with its position in ``expression``."""
    read: list[tuple[Constraint, DateSpec | None]] = []
    for span in _parse_spans(expression):
        constraint = span.constraint
        if constraint.name != _DATE:
            read.append((constraint, None))
            continue
        if len(constraint.values) > 1:
            raise FilterSyntaxError(f"{constraint.name} takes exactly one value", span.value_positions[1], expression, _DATE)
        try:
            spec = parse_date(constraint.values[0])
        except FilterSyntaxError as exc:
            raise FilterSyntaxError(
                f"{constraint.name}: {exc.reason}", span.value_positions[0] + exc.position, expression, _DATE
            ) from exc
        read.append((constraint, spec))
    return read


_TRAILING_NOTE = "the trailing ';' (an empty last constraint) is dropped"

_UNIT_WORDS: Mapping[str, str] = {"Y": "year", "M": "month", "W": "week", "D": "day", "H": "hour", "S": "second"}


def _described(spec: DateSpec, night: str, clipped: bool) -> str:
    """What a rewritten Date now selects, for its note."""
    if spec.kind == "relative":
        assert spec.amount is not None and spec.unit is not None
        unit = _UNIT_WORDS[spec.unit] + ("" if spec.amount == 1 else "s")
        return f"the last {spec.amount} {unit} up to the end of {night} (UTC)"
    what = f"the UTC year {spec.year}" if spec.kind == "year" else "the range"
    return f"{what}, clipped to the end of {night}" if clipped else what


def filter_for_night(expression: str, night: date, *, window: Window = "as_of", anchor: bool = True) -> NightFilter:
    """The filter to send for the harvest night ``night`` (a UTC date), so that the answer
    describes that night whatever day it is fetched on; ``expression`` is the filter as written.

    ``window="as_of"`` (the default), tournaments started up to the end of the night (its last
    second, ``night_end = epoch(night + 1 day, 00:00Z) - 1``):

    - each positive ``Date`` becomes, in place, an absolute ``Date:<start>~<end>`` range of epoch
      seconds (both inclusive) ending no later than ``night_end``:

      - relative ``nD`` ``nW`` ``nH`` ``nS`` (n > 0): ``start = night_end + 1 - n * unit``
        (a week is 7 days), ``end = night_end``;
      - relative ``nM`` and ``nY`` go by the calendar: ``start`` is 00:00Z of the day n months
        (``nY``: 12·n months) before the day after the night, keeping the day of the month and
        clamping it to the last day of the month landed in when that month is shorter (the rule
        of ``dateutil.relativedelta`` and SQL interval arithmetic). So ``1M`` for the night
        2026-03-30 (day after: 03-31) starts 2026-02-28, for 2024-03-30 it starts 2024-02-29,
        and ``1Y`` for the night 2024-02-28 (day after: 2024-02-29) starts 2023-02-28. Clamping
        lets neighbouring nights share a start (``1M`` starts on 02-28 for each night from
        2026-03-27 to 03-30); a later night never gets an earlier start;
      - a start before 1970-01-01 (a relative Date reaching back past it) is 0;
      - a year (``Date:2019``) is its UTC calendar year and an epoch range (``Date:a~b``) is
        itself, each with its end clipped to ``night_end``; one that starts after the night
        sets ``selects_nothing`` (and is sent as the empty clipped range, see
        :class:`NightFilter`);

    - a negative relative Date (``Date:-2D``, "the next n", active tournaments only) and an
      inverted one (``Date!:...``) cannot be anchored: sent as written, ``anchored=False``, with
      a note;
    - a filter with no positive Date (the unfiltered ``""`` included) gets
      ``Date:<DATA_START>~<night_end>`` appended as its last constraint.

    ``window="day"``: tournaments started during the night's own UTC day; every Date
    constraint (positive or inverted) is removed, with a note, and
    ``Date:<first second of the night>~<night_end>`` is appended.

    ``anchor=False`` (the watchlist's ``anchor: none``): sent exactly as written, not anchored.

    In every mode a trailing ``;`` is dropped, with a note: what is sent is the canonical form
    (:func:`canonical_filter`), so the same filter written with or without it is one request.

    Other constraints are kept byte for byte and in order. The result is a pure function of the
    arguments (a night re-harvested on any later day sends the identical filter), and ``sent``
    always parses and round-trips (``format_filter(parse_filter(sent)) == sent``).

    Raises :class:`FilterSyntaxError` for a malformed filter (a Date with a malformed value or
    more than one value included, with its position in ``expression``), and
    :class:`NightFilterError` for an unknown window, ``window="day"`` with ``anchor=False`` (a
    contradiction: the per-day window anchors the filter) and a night before :data:`FIRST_NIGHT`.
    """
    _check_night(night, window, anchor)
    read = _read_dates(expression)
    night_start = _midnight(night)
    night_end = night_start + _DAY_SECONDS - 1
    # What is sent (and keyed) is the canonical form: a trailing ';' is dropped, in every mode.
    trailing = (_TRAILING_NOTE,) if expression.endswith(";") else ()
    if not anchor:
        note = "sent as written (anchor: none): what it selects moves with the day it is fetched on"
        as_written = format_filter(Filter(tuple(constraint for constraint, _ in read)))
        return NightFilter(expression, as_written, False, False, (note, *trailing))
    if window == "day":
        day = Constraint(_DATE, False, (f"{night_start}~{night_end}",))
        removed = [str(constraint) for constraint, spec in read if spec is not None]
        kept = [constraint for constraint, spec in read if spec is None]
        what = f"replaces {', '.join(removed)}" if removed else "appended"
        note = f"the per-day window {day} ({night.isoformat()}, UTC) {what}"
        return NightFilter(expression, format_filter(Filter((*kept, day))), True, False, (note, *trailing))
    constraints, notes, anchored, nothing = _as_of(read, night, night_end)
    return NightFilter(expression, format_filter(Filter(tuple(constraints))), anchored, nothing, (*notes, *trailing))


def _check_night(night: date, window: Window, anchor: bool) -> None:
    """The arguments :func:`filter_for_night` refuses (see there)."""
    if window not in ("as_of", "day"):
        raise NightFilterError(f"unknown window {window!r}: 'as_of' or 'day'")
    if window == "day" and not anchor:
        raise NightFilterError("a per-day window anchors the filter to the night: it cannot be sent as written (anchor: none)")
    if isinstance(night, datetime) or not isinstance(night, date):
        raise TypeError(f"a night is a date, not {type(night).__name__}")
    if night < FIRST_NIGHT:
        raise NightFilterError(
            f"night {night.isoformat()} is before the service's data, which starts on {FIRST_NIGHT.isoformat()}"
        )


def _as_of(
    read: list[tuple[Constraint, DateSpec | None]], night: date, night_end: int
) -> tuple[list[Constraint], list[str], bool, bool]:
    """The constraints of the as-of window (see :func:`filter_for_night`), their notes, whether
    the filter is anchored and whether it selects nothing."""
    label = night.isoformat()
    constraints: list[Constraint] = []
    notes: list[str] = []
    anchored, nothing, dated = True, False, False
    for constraint, spec in read:
        if spec is None:
            constraints.append(constraint)
            continue
        if constraint.negated:
            anchored = False
            notes.append(f"{constraint} is inverted: sent as written, what it selects moves with the day it is fetched on")
            constraints.append(constraint)
            continue
        dated = True
        if spec.kind == "relative" and (spec.amount or 0) < 0:
            anchored = False
            notes.append(
                f"{constraint} selects upcoming tournaments (active ones only): sent as written, "
                "what it selects moves with the day it is fetched on"
            )
            constraints.append(constraint)
            continue
        start, end = _clipped(spec, night, night_end)
        rewritten = Constraint(_DATE, False, (f"{start}~{end}",))
        constraints.append(rewritten)
        if start > end:
            nothing = True
            notes.append(
                f"{constraint} selects nothing up to {label}: it starts after the night ends (clipped to the empty {rewritten})"
            )
        elif rewritten != constraint:
            clipped = spec.kind != "relative" and spec.bounds(night_end)[1] > end
            notes.append(f"{constraint} sent as {rewritten}: {_described(spec, label, clipped)}")
    if not dated:
        everything = Constraint(_DATE, False, (f"{DATA_START}~{night_end}",))
        constraints.append(everything)
        notes.append(f"no Date: {everything} appended (every tournament started up to the end of {label}, UTC)")
    return constraints, notes, anchored, nothing
